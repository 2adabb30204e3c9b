# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The plan of one cluster's switch to staged versions.

Each node says which venvs its ``current`` links point at now (None: no link yet) and which
venvs were staged for it. The plan says what the switch does, in the order Ray allows:

- ``install``: no node has a link yet (a first deployment): the phases install and start it.
- ``none``: every node already runs what was staged.
- ``vllm``: only vLLM changes: vLLM is stopped, its links switch, it starts; Ray keeps running.
- ``ray``: Ray changes (and with it the vLLM venv, which holds the same Ray): vLLM is stopped,
  both links switch, the head restarts and then every worker, vLLM starts.

``switch_to`` holds the staged venvs each node switches to, ``rollback`` the links each node had:
the switch's way back when the readiness gate fails.
Plain Python (no Ansible import): the filter ``rayvllm.fleet.upgrade_plan`` calls it.
"""

import os

ACTIONS = ("install", "none", "vllm", "ray")


def _name(path):
    return os.path.basename(path.rstrip("/")) if path else "nothing"


def _hosts(hosts):
    return ", ".join(hosts)


def cluster_plan(cluster, nodes):
    """Plan ``cluster``'s switch from ``nodes``: a list of mappings with the keys ``host``,
    ``ray_current``, ``ray_target``, ``vllm_current``, ``vllm_target`` and ``python`` (the
    Python X.Y.Z of the staged vLLM venv, empty if unknown).

    Returns ``{"cluster", "action", "ray_switch", "vllm_switch", "switch_to", "rollback",
    "problems", "lines"}``: the hosts whose Ray and vLLM links change, ``{host: {"ray",
    "vllm"}}`` links to switch to and links to restore, problems that must stop the switch
    before anything changes, and one line per step for the operator (and for ``--check``).
    """
    problems = []
    lines = []
    hosts = [n["host"] for n in nodes]
    linked = [n for n in nodes if n.get("ray_current") or n.get("vllm_current")]
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
    for key, what in (("ray_target", "Ray"), ("vllm_target", "vLLM")):
        targets = sorted({n.get(key) or "" for n in nodes})
        if len(targets) > 1:
            problems.append(
                "cluster %s: its nodes staged different %s venvs (%s); every node of a cluster must run the same "
                "versions: set ray_version and vllm_version for the whole cluster."
                % (cluster, what, ", ".join(targets))
            )

    ray_switch = [n["host"] for n in linked if n.get("ray_current") != n.get("ray_target")]
    vllm_switch = [n["host"] for n in linked if n.get("vllm_current") != n.get("vllm_target")]
    switch_to = {n["host"]: {"ray": n.get("ray_target"), "vllm": n.get("vllm_target")} for n in linked}
    rollback = {n["host"]: {"ray": n.get("ray_current"), "vllm": n.get("vllm_current")} for n in linked}

    if not linked:
        action = "install"
        lines.append("cluster %s: first installation on %s: nothing to switch" % (cluster, _hosts(hosts)))
    elif unlinked and (ray_switch or vllm_switch):
        action = "install"
        problems.append(
            "cluster %s: %s have no Ray or vLLM installed yet while %s change versions. Add the new nodes in a run "
            "without a version change (or limit this run to the nodes already serving), then upgrade."
            % (cluster, _hosts(unlinked), _hosts(sorted(set(ray_switch + vllm_switch))))
        )
    elif unlinked:
        action = "install"
        lines.append(
            "cluster %s: new nodes %s: the phases install them; nothing to switch" % (cluster, _hosts(unlinked))
        )
    elif ray_switch:
        action = "ray"
    elif vllm_switch:
        action = "vllm"
    else:
        action = "none"
        lines.append("cluster %s: every node runs the staged versions; nothing to switch" % cluster)

    if action in ("ray", "vllm"):
        first = next(n for n in linked if n["host"] in (ray_switch or vllm_switch))
        lines.append("cluster %s: stop vLLM on its head" % cluster)
        if action == "ray":
            lines.append(
                "cluster %s: Ray %s -> %s on %s; restart the head, then every worker; wait for every node and GPU"
                % (cluster, _name(first.get("ray_current")), _name(first.get("ray_target")), _hosts(ray_switch))
            )
        if vllm_switch:
            lines.append(
                "cluster %s: vLLM %s -> %s on %s"
                % (cluster, _name(first.get("vllm_current")), _name(first.get("vllm_target")), _hosts(vllm_switch))
            )
        lines.append("cluster %s: start vLLM; gate: /health, the model listed, one completion" % cluster)
        lines.append(
            "cluster %s: if the gate fails, back to Ray %s and vLLM %s, same order, and the run fails"
            % (cluster, _name(first.get("ray_current")), _name(first.get("vllm_current")))
        )
    return {
        "cluster": cluster,
        "action": action,
        "ray_switch": ray_switch,
        "vllm_switch": vllm_switch,
        "switch_to": switch_to,
        "rollback": rollback,
        "problems": problems,
        "lines": lines,
    }
