# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Nodes leaving the fleet (playbooks/remove_node.yml, ``remove_nodes``): the model of the fleet without them, what
each of them was (for its own cleanup), and the removals refused before anything changes."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import join
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import mode_row, resolve, row

HOW = "-e remove_nodes=<host>[,<host>...]"


def leaving_names(value):
    """The hosts of ``remove_nodes`` (a list, or names separated by commas), and the problems of its shape."""
    if isinstance(value, str):
        names = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        names = [part.strip() if isinstance(part, str) else part for part in value]
    else:
        return [], ["remove_nodes is %r: name the hosts to remove, %s." % (value, HOW)]
    bad = [n for n in names if not isinstance(n, str) or not n]
    names = [n for n in names if isinstance(n, str) and n]
    if bad or not names:
        return names, [
            "remove_nodes is %r: it needs the inventory names of the hosts to remove, separated by commas, with no "
            "empty name: %s." % (value, HOW)
        ]
    return list(dict.fromkeys(names)), []


def _int(value, default):
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number >= 0 else default


def removal_problems(names, full, groups, hosts, defaults):
    """Why the hosts ``names`` cannot leave: a name that is no Ray node of the inventory, a head (its cluster would
    go with it), a host that also runs monitoring or a router, or a cluster whose vLLM plan would not fit the GPUs
    its other nodes declare."""
    heads, workers, monitoring, routers = groups
    problems = []
    unknown = [n for n in names if n not in heads and n not in workers]
    if unknown:
        problems.append(
            "remove_nodes names %s, which %s no host of the inventory's ray_head or ray_workers groups (its Ray "
            "workers: %s). Use the inventory names of the hosts to remove, and keep them in the inventory until "
            "playbooks/remove_node.yml has removed them."
            % (join(unknown), "is" if len(unknown) == 1 else "are", join(sorted(workers)) or "none")
        )
    for name in names:
        node = full["nodes"].get(name)
        if node is None:
            continue
        if node["role"] == "head":
            problems.append(
                "remove_nodes names %s, the head of cluster %s: a head cannot leave its cluster, which would go with "
                "it. To retire the whole cluster, run playbooks/reset.yml --limit on its hosts (%s) with -e "
                "reset_confirm=yes and take them out of the inventory."
                % (name, node["cluster"], join(full["clusters"].get(node["cluster"], {}).get("hosts", [name])))
            )
        also = [g for g, members in (("monitoring", monitoring), ("router", routers)) if name in members]
        if also:
            problems.append(
                "remove_nodes names %s, which is also in the inventory's %s group%s: move %s to another host first "
                "(and run site.yml), then remove the node."
                % (name, " and ".join(also), "s" if len(also) > 1 else "", " and ".join(also))
            )
    settings = resolve(hosts, defaults, list(full["nodes"]))
    for cname, cluster in sorted(full["clusters"].items()):
        gone = [h for h in cluster["hosts"] if h in names]
        if not gone or cluster["head"] in gone:
            continue
        left = [h for h in cluster["hosts"] if h not in names]
        head = settings.get(cluster["head"], {})
        gpus = {h: _int(settings[h].get("ray_num_gpus"), None) for h in left}
        if any(g is None for g in gpus.values()):
            continue  # Ray detects them (ray_num_gpus null): nothing to count against here
        declared = sum(gpus.values())
        what = "%s GPUs (%s)" % (declared, join("%s %s" % (h, g) for h, g in gpus.items()))
        mode = mode_row(head)
        if mode["parallel_plan"] == "models":
            problems.extend(_serve_problems(gone, cname, what, declared, head.get(mode["models_setting"])))
            continue
        tp = _int(head.get("vllm_tensor_parallel_size"), 1) or 1
        pp = _int(head.get("vllm_pipeline_parallel_size") or 1, 1) or 1
        if tp * pp > declared:
            problems.append(
                "Removing %s leaves cluster %s %s, but its vLLM needs %d (vllm_tensor_parallel_size %d x "
                "vllm_pipeline_parallel_size %d): nothing was changed. Give the cluster a plan that fits the GPUs it "
                "keeps first (playbooks/upgrade.yml rolls it through the router's rotation and the gate), or add a "
                "node in its place." % (join(gone), cname, what, tp * pp, tp, pp)
            )
        elif tp > max(gpus.values() or [0]) and not head.get("vllm_allow_cross_node_tp"):
            problems.append(
                "Removing %s leaves cluster %s no node with %d GPUs for its tensor-parallel group (%s) and "
                "vllm_allow_cross_node_tp is off: nothing was changed. Give the cluster a plan that fits first."
                % (join(gone), cname, tp, what)
            )
    return problems


def _serve_problems(gone, cname, what, declared, models):
    """A ray_serve cluster: the GPUs it keeps must hold every model at max_replicas (max_replicas x TP x PP each, what
    preflight asks of the fleet that stays; Ray's drain moves the leaving node's replicas to them). Models preflight
    would refuse anyway (missing or unusable numbers) are not counted here."""
    parts, need = [], 0
    for model in models if isinstance(models, list) else []:
        if not isinstance(model, dict):
            continue
        counts = [_int(model.get(k), None) for k in ("max_replicas", "tensor_parallel_size", "pipeline_parallel_size")]
        if None in counts:
            continue
        need += counts[0] * counts[1] * counts[2]
        parts.append("%s %d x %d x %d" % (model.get("name"), counts[0], counts[1], counts[2]))
    if need <= declared:
        return []
    return [
        "Removing %s leaves cluster %s %s, but its Ray Serve models need %d at max_replicas (max_replicas x "
        "tensor_parallel_size x pipeline_parallel_size: %s): nothing was changed. Lower max_replicas in "
        "ray_serve_models first (site.yml applies it in place), or add a node in its place."
        % (join(gone), cname, what, need, ", ".join(parts))
    ]


def build_without(build, leaving, heads, workers, hosts, defaults, monitoring=(), routers=()):
    """The model of the fleet without the hosts ``leaving`` names, with ``leaving`` ({host: its node in the whole
    fleet, cluster, settings and address included}) and ``removal`` ({cluster: {head, leaving, staying}}); the
    problems of the removal come first, then those of the fleet that stays. Each removal entry also says whether the
    cluster's serving restarts when the leaving nodes run its actors (``restarts_for_actors``: ``vllm serve`` on Ray's
    executor cannot lose a rank; Ray Serve moves a leaving node's replicas itself)."""
    names, problems = leaving_names(leaving)
    full = build(heads, workers, hosts, defaults, monitoring, routers)[0]
    if not problems:
        problems = removal_problems(names, full, (heads, workers, monitoring, routers), hosts, defaults)
    if problems:
        names = []  # nothing leaves the model of a refused removal (no second message about what it would lack)

    def keep(group):
        return [h for h in group or [] if h not in names]

    model, left_problems = build(keep(heads), keep(workers), hosts, defaults, keep(monitoring), keep(routers))
    model["leaving"] = {
        h: dict(full["nodes"][h], address=full["addresses"].get(h, "")) for h in names if h in full["nodes"]
    }
    model["removal"] = {}
    for host, node in sorted(model["leaving"].items()):
        cluster = full["clusters"].get(node["cluster"], {})
        entry = model["removal"].setdefault(
            node["cluster"],
            {
                "head": cluster.get("head", ""),
                "leaving": [],
                "staying": [h for h in cluster.get("hosts", []) if h not in names],
                "restarts_for_actors": row(node["serving"]["mode"])["ranks_restart_server"],
            },
        )
        entry["leaving"].append(host)
    return model, problems + [p for p in left_problems if p not in problems]
