# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The preflight role's checks of each host (from rayvllm.fleet.host_probe and the facts) and across the hosts of
each cluster (roles/preflight/tasks/main.yml)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import truthy
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model import mixed_within_clusters
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.gpu_topology import (
    fleet_problems as fleet_gpu_problems,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    integer,
    is_sequence,
    mapping,
    node,
    sequence,
    text,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec

# The roles that change hosts without a validate task of their own: the preflight role checks the types of the
# inventory's values for them (roles/preflight/tasks/main.yml passes every host variable named after one of them).
OTHER_ROLES = ("host_prep", "node_exporter", "dcgm_exporter")


def problems(values, host, model, context):
    """values: the preflight role's variables and ray_python_interpreter; context: ``probe`` (the host's
    rayvllm.fleet.host_probe result), ``facts`` (its Ansible facts) and ``role_values`` (the host's variables named
    after one of OTHER_ROLES)."""
    v, found = values, []
    # The inventory's values for the roles that have no input checks of their own (OTHER_ROLES), against their
    # argument specs: a wrong type would otherwise be refused only when the role starts, after the roles before it.
    role_values = mapping(context.get("role_values"))
    for role in OTHER_ROLES:
        mine = dict((name, value) for name, value in role_values.items() if name.startswith(role + "_"))
        found.extend(spec.problems(role, mine, host))
    me = node(model, host)
    if not me:
        return found  # monitoring hosts and routers: the roles' own checks
    probe = context.get("probe") if isinstance(context.get("probe"), dict) else {}
    facts = context.get("facts") if isinstance(context.get("facts"), dict) else {}

    supported = v.get("preflight_supported_os") if is_sequence(v.get("preflight_supported_os")) else []
    if "%s %s" % (facts.get("distribution"), facts.get("distribution_major_version")) not in supported:
        found.append(
            "%s runs %s %s; supported: %s. Reinstall the host or remove it from the inventory."
            % (host, facts.get("distribution"), facts.get("distribution_version"), ", ".join(map(str, supported)))
        )

    python = mapping(probe.get("python"))
    if "error" in python:
        found.append(
            "%s does not run on %s (%s). Install python3 and python3-venv or set ray_python_interpreter to an "
            "existing interpreter." % (text(v.get("ray_python_interpreter")), host, python["error"])
        )

    shm, minimum = integer(probe.get("shm_mib")), integer(v.get("preflight_min_shm_mib"))
    if shm < minimum:
        found.append(
            "/dev/shm on %s is %d MiB (0: not mounted); Ray's object store and vLLM need at least %d MiB. Enlarge it "
            "(fstab: tmpfs /dev/shm tmpfs size=50%% 0 0; containers: --shm-size) or lower preflight_min_shm_mib."
            % (host, shm, minimum)
        )

    if truthy(v.get("preflight_check_ports")):
        ours = text(v.get("preflight_service_user"))
        ray_ports = set(me.get("ray_ports") or [])
        taken = [
            s
            for s in sequence(probe.get("listening"))
            if isinstance(s, dict) and s.get("port") in ray_ports and s.get("user") != ours
        ]
        if taken:
            found.append(
                "On %s Ray's ports are taken by other programs: %s. Stop those programs or move Ray to free ports "
                "(ray_*_port variables)." % (host, ", ".join(
                    "%s by %s (pid %s, user %s)" % (s.get("port"), s.get("name") or "?", s.get("pid") or "?",
                                                    s.get("user") or "?") for s in taken))
            )  # fmt: skip
    return found


def unknown_member_problem(member, cluster, model):
    """The message for a live member of ``cluster``'s Ray that no inventory host of the cluster accounts for."""
    nodes = model.get("nodes") or {}
    head = ((model.get("clusters") or {}).get(cluster) or {}).get("head", "")
    ip = text(member.get("ip"))
    elsewhere = sorted(h for h, n in nodes.items() if n.get("ip") == ip)
    where = (
        "the inventory puts %s (ray_node_ip %s) in cluster %s" % (elsewhere[0], ip, nodes[elsewhere[0]].get("cluster"))
        if elsewhere
        else "no host of the inventory has that address"
    )
    gpus = member.get("gpus") or 0
    return (
        "%s is a live member of cluster %s's Ray (ALIVE in the node list of its head %s%s), but %s. This run would "
        "firewall it off and stop monitoring it while Ray keeps scheduling work on it. If it belongs to cluster %s, "
        "add it back to the inventory (ray_workers, ray_node_ip %s). To retire it, put it back in the inventory, "
        "run playbooks/remove_node.yml -e remove_nodes=<it> (or stop Ray on it: ray stop --force), then remove it "
        "from the inventory."
        % (ip, cluster, head, ", %s GPUs" % (int(gpus) if float(gpus).is_integer() else gpus) if gpus else "", where,
           cluster, ip)
    )  # fmt: skip


def fleet_problems(values, host, model, context):
    """Across the hosts of each cluster, once. context: ``python`` ({host: the X.Y.Z its ray_python_interpreter
    runs, "" where it does not run}), ``gpus`` ({host: rayvllm.fleet.gpu_topology's result} of the hosts that ran
    it), ``gpu_settings`` ({cluster: {tensor_parallel_size, allow_cross_node_tp, require_nvlink}}), ``fabric``
    ({host: {"rc", "state"}} of the NVSwitch hosts whose fabric manager was asked), ``fabric_service`` and
    ``ray_members`` ({cluster: rayvllm.fleet.fleet_status_probe's ``ray`` result, read on the heads whose Ray
    runs})."""
    # Imported here: fleet_status also reads hosts over HTTP (urllib, ssl), which every other check goes without.
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.fleet_status import members_not_in_inventory

    nodes = model.get("nodes") or {}
    found = []
    for name, ray in sorted(mapping(context.get("ray_members")).items()):
        if not isinstance(ray, dict):
            continue
        for member in members_not_in_inventory(ray.get("nodes"), model, name):
            found.append(unknown_member_problem(member, name, model))
    versions = {h: text(version) for h, version in mapping(context.get("python")).items() if h in nodes}
    mixed = mixed_within_clusters(versions, {h: nodes[h].get("cluster") for h in versions}, "Python ")
    if mixed:
        found.append(
            "Ray refuses to mix Python versions inside a cluster, but %s. Install the same Python on every node of "
            "the cluster, or point ray_python_interpreter at one that matches." % " | ".join(mixed)
        )

    # GPUs: the clusters may differ from each other, not inside (each message lists every variant first).
    reports = {h: r for h, r in mapping(context.get("gpus")).items() if h in nodes and isinstance(r, dict)}
    settings = mapping(context.get("gpu_settings"))
    for name in sorted({nodes[h].get("cluster") for h in reports}):
        mine = {h: r for h, r in reports.items() if nodes[h].get("cluster") == name}
        wanted = mapping(settings.get(name))
        try:
            bad = fleet_gpu_problems(
                mine,
                tensor_parallel_size=integer(wanted.get("tensor_parallel_size")),
                allow_cross_node_tp=truthy(wanted.get("allow_cross_node_tp")),
                require_nvlink=truthy(wanted.get("require_nvlink")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            bad = ["the GPU reports cannot be compared (%s)" % exc]
        if bad:
            found.append("GPU preflight failed in cluster '%s': %s" % (name, " | ".join(bad)))
    for h, report in sorted(reports.items()):
        declared, count = (nodes[h].get("settings") or {}).get("ray_num_gpus"), report.get("gpu_count")
        if declared is not None and isinstance(count, int) and integer(declared) > count:
            found.append(
                "%s declares ray_num_gpus=%s but nvidia-smi shows %s GPUs: Ray would schedule work on GPUs that do "
                "not exist. Set ray_num_gpus to at most %s (or null to let Ray detect them)."
                % (h, declared, count, count)
            )
    service = text(context.get("fabric_service") or "nvidia-fabricmanager")
    for h, state in sorted(mapping(context.get("fabric")).items()):
        if isinstance(state, dict) and state.get("rc") != 0:
            found.append(
                "%s has %s NVLink-meshed GPUs (an NVSwitch system) but %s is %s: CUDA cannot initialise the GPUs "
                "without it. Install the nvidia-fabricmanager package matching driver %s and run: systemctl enable "
                "--now %s" % (h, reports.get(h, {}).get("gpu_count"), service, text(state.get("state") or "").strip()
                              or "not installed", reports.get(h, {}).get("driver_version"), service)
            )  # fmt: skip
    return found
