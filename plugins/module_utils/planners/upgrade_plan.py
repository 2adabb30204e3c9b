# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The plan of one cluster's switch to what was staged on its nodes.

Each node says, for each part it runs from a link (``ray``: the Ray venv, ``vllm``: the vLLM venv,
``model``: the weights' revision), which path the link points at now (None: no link yet) and
which path was staged for it. The plan says what the switch does, in the order Ray allows:

- ``install``: no node has a Ray or vLLM link yet (a first deployment): the phases install it.
- ``none``: every node already runs what was staged.
- ``vllm``: the vLLM venv and/or the weights change: vLLM is stopped, those links switch, it starts;
  Ray keeps running.
- ``ray``: Ray changes (and with it the vLLM venv, which holds the same Ray), or Ray's environment file or unit
  changes on a node (a start flag such as ``--num-gpus``): vLLM is stopped, every link switches, the changed Ray files
  are written, the head restarts and then every worker, vLLM starts.

``switch`` lists the links to move (host, link, target); ``rollback`` the same links back to what
they pointed at, the switch's way back when the readiness gate fails.
Plain Python (no Ansible import): the filter ``rayvllm.fleet.upgrade_plan`` calls it.
"""

import os

ACTIONS = ("install", "none", "vllm", "ray")
PARTS = ("ray", "vllm", "model")
LABELS = {"ray": "Ray", "vllm": "vLLM", "model": "weights"}
_RESTART_RAY = "; restart the head, then every worker; wait for every node and GPU"


def _name(path):
    return os.path.basename(path.rstrip("/")) if path else "nothing"


def _hosts(hosts):
    return ", ".join(hosts)


def _part(node, part):
    """{"link", "current", "target"} of a part on a node, or None when the node does not run it by link."""
    value = node.get(part) or {}
    return value if value.get("link") and value.get("target") else None


def cluster_plan(cluster, nodes, outside=()):
    """Plan ``cluster``'s switch from ``nodes``: a list of mappings with ``host``, ``python`` (the Python
    X.Y.Z of the staged vLLM venv, empty if unknown) and, per part (``ray``, ``vllm``, ``model``), a
    mapping ``{"link", "current", "target"}`` (a missing part or an empty link: not run from a link), and
    ``ray_files``: which of Ray's files would change on the node (empty: none), which restarts Ray too.

    Returns ``{"cluster", "action", "reason", "changes", "switch", "rollback", "back", "problems", "lines"}``:
    why it restarts (for messages), the hosts each part changes on, the links to move and to move back (lists
    of ``{"host", "link", "target"}``), what the cluster runs now (for messages), problems that must stop the
    switch before anything changes, and one line per step for the operator (and for ``--check``).

    ``outside``: the cluster's hosts outside this run (``--limit``), which staged nothing: a switch restarts every
    node of the cluster, so it is refused naming them; without one they are left as they are.
    """
    problems = []
    lines = []
    hosts = [n["host"] for n in nodes]
    linked = [n for n in nodes if any((_part(n, p) or {}).get("current") for p in ("ray", "vllm"))]
    unlinked = [n["host"] for n in nodes if n not in linked]

    pythons = {}
    for node in nodes:
        if node.get("python"):
            pythons.setdefault(node["python"], []).append(node["host"])
    if len(pythons) > 1:
        problems.append(
            "cluster %s: the staged vLLM venvs run different Python versions (%s); Ray refuses mixed Python "
            "X.Y.Z within a cluster. Install the same Python on every node (ray_python_interpreter) and run again."
            % (cluster, "; ".join("%s on %s" % (v, _hosts(h)) for v, h in sorted(pythons.items())))
        )
    for part in PARTS:
        targets = sorted({_part(n, part)["target"] for n in nodes if _part(n, part)})
        if len(targets) > 1:
            problems.append(
                "cluster %s: its nodes staged different %s (%s); every node of a cluster must run the same: set the "
                "versions and the model for the whole cluster." % (cluster, LABELS[part], ", ".join(targets))
            )

    changes = {
        part: [
            n["host"] for n in linked if _part(n, part) and _part(n, part).get("current") != _part(n, part)["target"]
        ]
        for part in PARTS
    }
    changing = sorted({host for part in PARTS for host in changes[part]})
    # A node added beside a start-flag change installs as before (Ray's own handler restarts the changed nodes).
    ray_files = {n["host"]: n["ray_files"] for n in linked if n.get("ray_files") and not unlinked}

    if not linked:
        action = "install"
        lines.append("cluster %s: first installation on %s: nothing to switch" % (cluster, _hosts(hosts)))
    elif unlinked and changing:
        action = "install"
        problems.append(
            "cluster %s: %s have no Ray or vLLM installed yet while %s change versions or weights. Add the new nodes "
            "in a run without a version change (or limit this run to the nodes already serving), then upgrade."
            % (cluster, _hosts(unlinked), _hosts(changing))
        )
    elif unlinked:
        action = "install"
        lines.append(
            "cluster %s: new nodes %s: site.yml installs them; nothing to switch" % (cluster, _hosts(unlinked))
        )
    elif changes["ray"] or ray_files:
        action = "ray"
    elif changes["vllm"] or changes["model"]:
        action = "vllm"
    else:
        action = "none"
        lines.append("cluster %s: every node runs what was staged; nothing to switch" % cluster)

    outside = [h for h in outside if h not in hosts]
    changing = sorted(set(changing) | set(ray_files))
    if outside and action in ("ray", "vllm"):
        problems.append(
            "cluster %s: %s change on %s, which restarts every node of the cluster, but %s %s outside this run "
            "(--limit): run again with the whole cluster in the limit, or without --limit."
            % (cluster, "Ray" if action == "ray" else "vLLM or its weights", _hosts(changing), _hosts(outside),
               "is" if len(outside) == 1 else "are")
        )  # fmt: skip
    elif outside:
        lines.append("cluster %s: %s outside this run (--limit): not touched" % (cluster, _hosts(outside)))

    switch, rollback, back = [], [], {}
    if action in ("ray", "vllm"):
        for node in linked:
            for part in PARTS:
                value = _part(node, part)
                if node["host"] in changes[part]:
                    switch.append({"host": node["host"], "link": value["link"], "target": value["target"]})
                    if value.get("current"):
                        rollback.append({"host": node["host"], "link": value["link"], "target": value["current"]})
        lines.append("cluster %s: stop vLLM on its head" % cluster)
        if ray_files:
            files = {}
            for host, what in ray_files.items():
                files.setdefault(what, []).append(host)
            lines.append(
                "cluster %s: Ray's %s change: written before Ray restarts%s"
                % (cluster, "; ".join("%s on %s" % (what, _hosts(h)) for what, h in sorted(files.items())),
                   "" if changes["ray"] else _RESTART_RAY)
            )  # fmt: skip
        for part in PARTS:
            if changes[part]:
                first = next(n for n in linked if n["host"] in changes[part])
                current, target = _part(first, part).get("current"), _part(first, part)["target"]
                back[part] = _name(current)
                lines.append(
                    "cluster %s: %s %s -> %s on %s%s"
                    % (cluster, LABELS[part], _name(current), _name(target), _hosts(changes[part]),
                       _RESTART_RAY if part == "ray" else "")
                )  # fmt: skip
    backs = ["%s %s" % (LABELS[p], back[p]) for p in PARTS if p in back] + (["Ray's files"] if ray_files else [])
    if action in ("ray", "vllm"):
        lines.append("cluster %s: start vLLM; gate: /health, the model listed, one completion" % cluster)
        lines.append(
            "cluster %s: if the gate fails, back to %s, same order, and the run fails" % (cluster, ", ".join(backs))
        )
    reasons = ["new versions or weights"] if any(changes[p] for p in PARTS) else []
    reasons += ["Ray's changed start flags or environment"] if ray_files else []
    return {
        "cluster": cluster,
        "action": action,
        "reason": " and ".join(reasons),
        "changes": changes,
        "switch": switch,
        "rollback": rollback,
        "back": ", ".join(backs),
        "problems": problems,
        "lines": lines,
    }
