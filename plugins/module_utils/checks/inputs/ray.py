# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The ray role's input checks (roles/ray/tasks/validate.yml)."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import count, kind, owned_flags, shown
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import RAY_HEAD_PORTS, RAY_NODE_PORTS
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    cluster,
    digits,
    in_private_tmp,
    integer,
    mapping,
    node,
    not_absolute,
    owned_flags_problem,
    text,
    unsafe,
    wheelhouse_source,
)

UNIT_VALUES = (
    "ray_user",
    "ray_group",
    "ray_install_root",
    "ray_data_dir",
    "ray_temp_dir",
    "ray_config_dir",
    "ray_dashboard_host",
    "ray_resources",
    "ray_extra_start_args",
    "ray_environment",
    "ray_prometheus_host",
    "ray_prometheus_name",
    "ray_grafana_host",
    "ray_grafana_iframe_host",
    "ray_systemd_hardening",
)
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
# The flags of `ray start` the role writes itself (roles/ray/vars/main.yml, _ray_start_args), and what sets each.
RAY_OWNED_FLAGS = {
    "--head": "the ray_head group",
    "--address": "the fleet model (the cluster's head)",
    "--port": "ray_gcs_port",
    "--dashboard-host": "ray_dashboard_host",
    "--dashboard-port": "ray_dashboard_port",
    "--ray-client-server-port": "ray_client_server_port",
    "--node-ip-address": "ray_node_ip",
    "--metrics-export-port": "ray_metrics_export_port",
    "--node-manager-port": "ray_node_manager_port",
    "--object-manager-port": "ray_object_manager_port",
    "--dashboard-agent-listen-port": "ray_dashboard_agent_listen_port",
    "--dashboard-agent-grpc-port": "ray_dashboard_agent_grpc_port",
    "--runtime-env-agent-port": "ray_runtime_env_agent_port",
    "--min-worker-port": "ray_min_worker_port",
    "--max-worker-port": "ray_max_worker_port",
    "--temp-dir": "ray_temp_dir",
    "--num-gpus": "ray_num_gpus",
    "--num-cpus": "ray_num_cpus",
    "--object-store-memory": "ray_object_store_memory",
    "--resources": "ray_resources",
    "--block": "nothing (systemd runs ray start in the foreground already)",
}
# Resources Ray counts itself: a custom resource of that name is refused by `ray start`.
RAY_BUILTIN_RESOURCES = {"CPU": "ray_num_cpus", "GPU": "ray_num_gpus", "memory": None,
                         "object_store_memory": "ray_object_store_memory"}  # fmt: skip


def problems(values, host, model, context):
    """values: the ray role's variables (an unset ray_version is '<unset>'); context: ``probe`` (the host's
    rayvllm.fleet.host_probe result, when preflight passes it), ``ray_auth_token_inventory``
    and ``head_ray_auth_token_inventory``
    (the inventory's ray_auth_token of this host and of its cluster's head, None where unset)."""
    v, found = values, []
    found.extend(not_absolute(v, ("ray_install_root", "ray_data_dir", "ray_temp_dir", "ray_config_dir"), host))
    found.extend(wheelhouse_source(v, "ray", host))
    version = v.get("ray_version")
    if version is None or not VERSION_RE.match(text(version)):
        found.append(
            "ray_version must be an exact X.Y.Z release (every node and driver must run the same Ray); got '%s' on "
            '%s. Pin it in your inventory\'s group_vars/all.yml, e.g. ray_version: "2.60.0".' % (text(version), host)
        )
    for key, what in (
        ("ray_venvs_keep", "older venvs kept besides the current and the previous one"),
        ("ray_stop_drain_timeout", "seconds a node drains on SIGTERM"),
    ):
        if not digits(v.get(key)):
            found.append(
                "%s must be a whole number, 0 or more (%s); got '%s' on %s." % (key, what, text(v.get(key)), host)
            )

    ports = [integer(v.get(p)) for p in RAY_NODE_PORTS + RAY_HEAD_PORTS]
    low, high = integer(v.get("ray_min_worker_port")), integer(v.get("ray_max_worker_port"))
    if len(set(ports)) != len(ports) or low >= high or any(low <= p <= high for p in ports):
        found.append(
            "Ray ports on %s overlap: %s with worker range %s-%s. Give each ray_*_port its own number outside the "
            "worker range." % (host, ", ".join(str(p) for p in sorted(ports)), text(v.get("ray_min_worker_port")),
                               text(v.get("ray_max_worker_port")))
        )  # fmt: skip

    # Each on its own, naming only what is wrong.
    resources = v.get("ray_resources")
    for key in ("ray_num_gpus", "ray_num_cpus"):
        if v.get(key) is not None:
            count(found, key, v.get(key), "on " + host, fix="Give the node's count, or null to let Ray detect it.")
    if not isinstance(resources, dict):
        found.append(
            "ray_resources on %s is %s, %s: give a mapping of custom resource names to amounts, e.g. {fast_disk: 1}."
            % (host, kind(resources), shown(resources))
        )

    store = v.get("ray_object_store_memory")
    memory_mib = integer(mapping(context.get("probe")).get("memory_mib"))
    if digits(store) and memory_mib > 0 and int(text(store)) >= memory_mib * 1024 * 1024:
        found.append(
            "ray_object_store_memory on %s is %s bytes (%d MiB), but the host has %d MiB of memory: ray start refuses "
            "an object store that leaves nothing for tasks. Set it well below the memory (Ray's default is 30%% of "
            "it), or remove it." % (host, text(store), int(text(store)) // (1024 * 1024), memory_mib)
        )
    builtin = sorted(k for k in resources if k in RAY_BUILTIN_RESOURCES) if isinstance(resources, dict) else []
    if builtin:
        found.append(
            "ray_resources on %s names %s, which Ray counts itself (ray start refuses a custom resource of that "
            "name): %s." % (host, ", ".join(builtin), "; ".join(
                "set %s instead of %s" % (RAY_BUILTIN_RESOURCES[k], k) if RAY_BUILTIN_RESOURCES[k]
                else "remove %s (Ray measures the node's memory)" % k for k in builtin))
        )  # fmt: skip
    owned = owned_flags_problem(
        "ray_extra_start_args", host, owned_flags(v.get("ray_extra_start_args"), RAY_OWNED_FLAGS), "ray"
    )
    if owned:
        found.append(owned)

    if text(v.get("ray_user")) in ("root", "0") or text(v.get("ray_group")) in ("root", "0"):
        found.append(
            "ray_user/ray_group on %s is root: every job submitted to the cluster, and vLLM, would run as root. Use an "
            "unprivileged account (the default, ray)." % host
        )

    mode, token = v.get("ray_auth_mode"), v.get("ray_auth_token")
    if mode not in ("token", "disabled") or (
        mode == "token" and not (isinstance(token, str) and len(token) >= 32 and not re.search(r"\s", token))
    ):
        found.append(
            "On %s: ray_auth_mode must be 'token' (the default) or 'disabled', and with 'token' ray_auth_token must "
            "be at least 32 characters without white space. Remove ray_auth_token to have one generated per cluster "
            "(kept in the inventory's credentials/ directory), or set it from a vault." % host
        )

    environment = v.get("ray_environment")
    overridden = [k for k in environment if re.match(r"^RAY_AUTH_", str(k))] if isinstance(environment, dict) else []
    if overridden:
        found.append(
            "ray_environment on %s sets %s, which would override the cluster's token authentication on this node "
            "only. Remove it: ray_auth_mode (the same on every node of a cluster) and ray_auth_token set them."
            % (host, ", ".join(overridden))
        )

    # A node with a token of its own cannot join its cluster. The token differs only where the inventory sets it
    # per host (the default is one file per cluster): compare the inventory's values (never shown).
    me, head = node(model, host), cluster(model, host).get("head")
    if mode == "token" and me.get("role") == "worker" and head:
        if context.get("ray_auth_token_inventory") != context.get("head_ray_auth_token_inventory"):
            found.append(
                "ray_auth_token on %s differs from the one of %s, the head of cluster %s: a node with another token "
                "cannot join. Set ray_auth_token once for the cluster (its group_vars, for the head too), or leave it "
                "unset everywhere to have one generated per cluster." % (host, head, me.get("cluster"))
            )

    bad = unsafe(dict(v, ray_version=text(v.get("ray_version", ""))), UNIT_VALUES + ("ray_version",))
    if bad:
        found.append(
            "On %s: %s. A newline in a value written into the Ray unit or ray.env would start a directive of its own "
            "(e.g. ExecStartPre=+..., run as root): remove it." % (host, ", ".join(bad))
        )

    if in_private_tmp(v.get("ray_systemd_hardening"), {"ray_temp_dir": v.get("ray_temp_dir")}):
        found.append(
            "ray_temp_dir=%s on %s is under /tmp or /var/tmp, but the Ray units have a private /tmp "
            "(ray_systemd_hardening.PrivateTmp): drivers in other units, such as the vLLM server, would not find the "
            "node's Ray session. Use a directory outside /tmp (the default is /var/lib/ray/tmp), or set PrivateTmp "
            'to "".' % (text(v.get("ray_temp_dir")), host)
        )
    return found
