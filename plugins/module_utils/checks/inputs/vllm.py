# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The vllm role's input checks (roles/vllm/tasks/validate.yml)."""

import json
import os
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import (
    count,
    kind,
    owned_flags,
    port,
    shown,
    truthy,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    cluster,
    digits,
    in_private_tmp,
    is_sequence,
    node,
    not_absolute,
    number,
    owned_flags_problem,
    text,
    unsafe,
    wheelhouse_source,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import mode_row
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.vllm_parallelism import PlanError, plan

UNIT_VALUES = (
    "vllm_model_path",
    "vllm_served_model_name",
    "vllm_host",
    "vllm_extra_args",
    "vllm_environment",
    "vllm_api_key",
    "vllm_install_root",
    "vllm_data_dir",
    "vllm_config_dir",
    "vllm_user",
    "vllm_group",
    "vllm_systemd_hardening",
)
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
# The flags of `vllm serve` the role writes itself (roles/vllm/vars/main.yml, _vllm_serve_args), and what sets each.
# --api-key has a message of its own (a secret on the command line).
VLLM_OWNED_FLAGS = {
    "--model": "model_path (vllm_model_path)",
    "--distributed-executor-backend": "nothing (the fleet runs vLLM on its Ray cluster: ray)",
    "--tensor-parallel-size": "vllm_tensor_parallel_size",
    "-tp": "vllm_tensor_parallel_size",
    "--pipeline-parallel-size": "vllm_pipeline_parallel_size",
    "-pp": "vllm_pipeline_parallel_size",
    "--served-model-name": "vllm_served_model_name",
    "--host": "vllm_host",
    "--port": "vllm_port",
    "--gpu-memory-utilization": "vllm_gpu_memory_utilization",
    "--max-model-len": "vllm_max_model_len",
}
LOOPBACK_RE = re.compile(r"^(127\.\d+\.\d+\.\d+|::1|localhost)$")


def problems(values, host, model, context):
    """values: the vllm role's variables (an unset vllm_version is '<unset>'); context: ``model_source``,
    ``model_controller_path`` (the weights the plan is checked against on the controller) and ``ray_temp_dir``."""
    v, found = values, []
    version = v.get("vllm_version")
    if version is None or not VERSION_RE.match(text(version)):
        found.append(
            "vllm_version must be an exact X.Y.Z release (every Ray node runs the same vLLM); got '%s' on %s. Pin it "
            'in your inventory\'s group_vars/all.yml, e.g. vllm_version: "0.11.0".' % (text(version), host)
        )
    for key, what in (
        ("vllm_venvs_keep", "older venvs kept besides the current and the previous one"),
        ("vllm_stop_timeout", "seconds systemd waits for vLLM to stop"),
    ):
        if not digits(v.get(key)):
            found.append(
                "%s must be a whole number, 0 or more (%s); got '%s' on %s." % (key, what, text(v.get(key)), host)
            )

    found.extend(not_absolute(v, ("vllm_install_root", "vllm_config_dir", "vllm_data_dir"), host))
    found.extend(wheelhouse_source(v, "vllm", host))
    # Each unusable setting on its own, naming it, its value and the fix (a single message used to list every
    # requirement, the settings that were fine included).
    path, served = v.get("vllm_model_path"), v.get("vllm_served_model_name")
    if not (isinstance(path, str) and re.match(r"^/.+", path)):
        found.append(
            "vllm_model_path on %s is '%s': not an absolute path. Set model_path (the weights' directory on every "
            "node, e.g. /srv/models/<name>)." % (host, text(path))
        )
    if served is None or served == "":
        found.append(
            'vllm_served_model_name on %s is empty: give the name clients send as "model" (the default is '
            "model_path's last part)." % host
        )
    for key in ("vllm_tensor_parallel_size", "vllm_pipeline_parallel_size"):
        count(
            found, key, v.get(key), "on " + host, fix="Give one, or 0 to let the role choose from the cluster's GPUs."
        )
    port(found, "vllm_port", v.get("vllm_port"), "on " + host, "Set it to a free port from 1 to 65535 (8000)")
    if not 0 < number(v.get("vllm_gpu_memory_utilization")) <= 1:
        found.append(
            "vllm_gpu_memory_utilization on %s is '%s': not a fraction in (0, 1]. Give the share of each GPU's memory "
            "vLLM may use, e.g. 0.9." % (host, text(v.get("vllm_gpu_memory_utilization")))
        )
    if v.get("vllm_max_model_len") is not None:
        count(found, "vllm_max_model_len", v.get("vllm_max_model_len"), "on " + host,
              fix="Give the context length in tokens, or null for the model's own.")  # fmt: skip
    if not is_sequence(v.get("vllm_extra_args")):
        found.append(
            "vllm_extra_args on %s is %s, %s: give a list, one flag or value per item (e.g. [--enforce-eager])."
            % (host, kind(v.get("vllm_extra_args")), shown(v.get("vllm_extra_args")))
        )
    if not isinstance(v.get("vllm_environment"), dict):
        found.append(
            "vllm_environment on %s is %s, %s: give a mapping of variable names to values."
            % (host, kind(v.get("vllm_environment")), shown(v.get("vllm_environment")))
        )

    if served is not None and not isinstance(served, str):
        found.append(
            'vllm_served_model_name on %s is %s: give one name, a string (clients send it as "model"; the router '
            "and the dashboards key on it)." % (host, kind(served) + ", " + shown(served))
        )

    key = v.get("vllm_api_key")
    if not (isinstance(key, str) and len(key) >= 16 and not re.search(r"\s", key)):
        found.append(
            "vllm_api_key on %s is empty, shorter than 16 characters or holds white space: anyone reaching the vLLM "
            "port could use the model. Remove the setting to have a key generated (kept in the inventory's "
            "credentials/ directory) or set vllm_api_key from a vault." % host
        )
    extra = v.get("vllm_extra_args") if is_sequence(v.get("vllm_extra_args")) else []
    if any(str(arg).startswith("--api-key") for arg in extra):
        found.append(
            "vllm_extra_args contains --api-key: the command line is visible to every user (ps, journal). Set "
            "vllm_api_key (from a vault) instead; it is passed through a root-only environment file."
        )

    owned = owned_flags_problem("vllm_extra_args", host, owned_flags(extra, VLLM_OWNED_FLAGS), "vllm")
    if owned:
        found.append(owned)
    found.extend(_reachable(v, host, model))

    environment = v.get("vllm_environment") if isinstance(v.get("vllm_environment"), dict) else {}
    overridden = [k for k in environment if re.match(r"^(RAY_AUTH_|VLLM_API_KEY$)", str(k))]
    if text(v.get("vllm_user")) in ("root", "0") or text(v.get("vllm_group")) in ("root", "0") or overridden:
        found.append(
            "On %s: vllm_user/vllm_group must not be root (got %s/%s; vLLM would run model code as root: use the "
            "default, ray)%s." % (
                host, text(v.get("vllm_user")), text(v.get("vllm_group")),
                ", and vllm_environment must not set %s (ray_auth_mode, ray_auth_token and vllm_api_key set them)"
                % ", ".join(overridden) if overridden else "",
            )
        )  # fmt: skip

    bad = unsafe(dict(v, vllm_version=text(version)), UNIT_VALUES + ("vllm_version",))
    if bad:
        found.append(
            "On %s: %s. A newline in a value written into vllm.service or vllm.env would start a directive of its own "
            "(e.g. ExecStartPre=+..., run as root): remove it." % (host, ", ".join(bad))
        )

    found.extend(_parallel_plan(v, host, model, context))

    temp = context.get("ray_temp_dir")
    dirs = {"ray_temp_dir": temp, "vllm_environment.VLLM_RPC_BASE_PATH": environment.get("VLLM_RPC_BASE_PATH", temp)}
    in_tmp = in_private_tmp(v.get("vllm_systemd_hardening"), dirs)
    if in_tmp:
        found.append(
            "On %s: %s under /tmp or /var/tmp, but vllm.service has a private /tmp "
            "(vllm_systemd_hardening.PrivateTmp): the Ray head's processes, including the vLLM ranks Ray places on "
            "this node, would not see the engine's "
            "ZeroMQ sockets or Ray's session, and the server would hang at start. Use a directory outside /tmp "
            '(ray_temp_dir defaults to /var/lib/ray/tmp), or set PrivateTmp to "".' % (host, ", ".join(in_tmp))
        )
    return found


def _reachable(v, host, model):
    """A cluster's head whose vLLM listens on a loopback address serves no one but itself: the routers and Prometheus
    on other hosts, and the gate, reach it at its URL."""
    me = node(model, host)
    listen = text(v.get("vllm_host") or "")
    if me.get("role") != "head" or not LOOPBACK_RE.match(listen):
        return []
    routers = model.get("routers") or {}
    behind = [
        r for r in routers.get("hosts") or []
        if any(b.get("cluster") == me.get("cluster") for m in (routers.get("models") or {}).values()
               for b in m.get("backends") or [])
    ]  # fmt: skip
    monitoring = model.get("monitoring") or {}
    watchers = [h for h in [monitoring.get("host")] + list(monitoring.get("addresses") or {}) if h]
    others = sorted(set(h for h in behind + watchers if h != host))
    if not others:
        return []
    return [
        "vllm_host on %s is %s, a loopback address, but %s reach cluster %s's vLLM over the network (the router "
        "sends it requests, Prometheus scrapes it): they would get nothing. Set vllm_host to 0.0.0.0 (the default; "
        "vllm_allowed_cidrs and the firewall limit who reaches it) or to this node's address."
        % (host, listen, ", ".join(others), me.get("cluster"))
    ]


def _serves_with_vllm_serve(me):
    """Whether the cluster's engine has one parallel plan (its mode's parallel_plan); a ray_serve cluster plans each
    model's replicas instead (inputs/ray_serve.py): vllm_tensor_parallel_size and vllm_pipeline_parallel_size do not
    apply to it."""
    return mode_row(me.get("settings") or {})["parallel_plan"] == "cluster"


def _gpu_arithmetic(v, host, model):
    """Without the model's config (model_source other than controller) the plan is checked against the GPUs the
    cluster declares (every node's ray_num_gpus): some GPU at all, and TP x PP no more than there are."""
    me, mine = node(model, host), cluster(model, host)
    gpus = mine.get("gpus_per_node") or []
    if me.get("role") != "head" or not _serves_with_vllm_serve(me) or not gpus or not all(digits(g) for g in gpus):
        return []
    declared = sum(int(text(g)) for g in gpus)
    tp, pp = v.get("vllm_tensor_parallel_size"), v.get("vllm_pipeline_parallel_size")
    if declared == 0:
        return [
            "Cluster '%s' declares no GPU (ray_num_gpus is 0 on each of its %d nodes): vLLM would wait for GPUs Ray "
            "does not have. Set ray_num_gpus to each node's GPU count, or null to let Ray detect them."
            % (me.get("cluster"), len(gpus))
        ]
    # 0 is auto: at least 1 (TP 8 with PP auto needs 8 GPUs; it passed before, as only TP and PP both set counted).
    sizes = [int(text(x)) for x in (tp, pp) if digits(x)]
    needed = max(sizes[0], 1) * max(sizes[1], 1) if len(sizes) == 2 and max(sizes) > 0 else 0
    if needed > declared:
        return [
            "Cluster '%s' declares %d GPUs (ray_num_gpus %s), but vllm_tensor_parallel_size %s x "
            "vllm_pipeline_parallel_size %s needs %d: vLLM would wait for GPUs that are not there. Lower them (0 = "
            "auto) or declare the GPUs the nodes have."
            % (me.get("cluster"), declared, "+".join(text(g) for g in gpus), text(tp), text(pp), needed)
        ]  # fmt: skip
    return []


def _parallel_plan(v, host, model, context):
    """The weights come from the controller and every node declares its GPUs: the parallel plan is checked now, once
    per cluster (on its head), before any host changes. (Otherwise the serve step plans against the live cluster,
    still before vLLM starts.)"""
    me, mine = node(model, host), cluster(model, host)
    gpus = mine.get("gpus_per_node") or []
    source, copy = context.get("model_source"), context.get("model_controller_path")
    if not _serves_with_vllm_serve(me):
        return []
    if me.get("role") != "head" or source != "controller" or not copy or not gpus or any(g is None for g in gpus):
        return _gpu_arithmetic(v, host, model)
    config_path = os.path.join(str(copy), "config.json")
    try:
        with open(config_path) as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return _gpu_arithmetic(v, host, model)  # the model role's checks name the missing or unreadable copy
    tp, pp = v.get("vllm_tensor_parallel_size"), v.get("vllm_pipeline_parallel_size")
    if not digits(tp) or not digits(pp) or not all(digits(g) for g in gpus):
        return []  # named above
    try:
        plan(config, [int(g) for g in gpus], int(text(tp)), int(text(pp)), truthy(v.get("vllm_allow_cross_node_tp")))
    except PlanError as exc:
        return [
            "vLLM cannot run cluster '%s' as planned (vllm_tensor_parallel_size %s, vllm_pipeline_parallel_size %s, "
            "GPUs per node %s from ray_num_gpus, the model's %s): %s."
            % (me.get("cluster"), text(tp), text(pp), "+".join(str(g) for g in gpus), config_path, exc)
        ]
    return []
