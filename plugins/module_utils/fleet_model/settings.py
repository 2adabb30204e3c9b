# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The settings the fleet model reads, resolved once for every host of the fleet (Ray nodes, monitoring hosts,
routers): the inventory's value, else the owning role's default."""

import copy

# Ports Ray listens on at every node, and at a head only.
RAY_NODE_PORTS = (
    "ray_metrics_export_port",
    "ray_node_manager_port",
    "ray_object_manager_port",
    "ray_dashboard_agent_listen_port",
    "ray_dashboard_agent_grpc_port",
    "ray_runtime_env_agent_port",
)
RAY_HEAD_PORTS = ("ray_gcs_port", "ray_dashboard_port", "ray_client_server_port")
RAY_PORTS = RAY_HEAD_PORTS + RAY_NODE_PORTS + ("ray_min_worker_port", "ray_max_worker_port")

# Settings other roles read for hosts other than the one they run on (Prometheus scrapes every node, the vLLM
# server talks to its head, ...). Their defaults are read from the owning role's defaults/main.yml (the one place
# each is declared); inventory values win.
SHARED_SETTINGS = {
    "ray": (
        "ray_python_interpreter",
        "ray_install_root",
        "ray_user",
        "ray_group",
        "ray_config_dir",
        "ray_temp_dir",
        "ray_auth_mode",
        "ray_environment",
        "ray_prometheus_name",
        "ray_num_gpus",
    )
    + RAY_PORTS,
    "vllm": (
        "vllm_serving_mode",
        "vllm_package",
        "vllm_port",
        "vllm_host",
        "vllm_install_root",
        "vllm_tensor_parallel_size",
        "vllm_allow_cross_node_tp",
        "vllm_allowed_cidrs",
        "vllm_config_dir",
    ),
    "preflight": ("preflight_gpu_check",),
    # How weights and wheelhouses spread between the nodes (roles/peer_share): the model role's settings, read by the
    # python_venv role of every node too.
    "model": (
        "model_distribution",
        "model_distribution_scope",
        "model_distribution_port",
        "model_distribution_bwlimit",
        "model_distribution_timeout",
    ),
    "prometheus": ("prometheus_web_listen_address", "prometheus_scrape_interval", "prometheus_ray_head_metrics_ports"),
    "grafana": ("grafana_http_addr", "grafana_http_port"),
    "alertmanager": ("alertmanager_install_source", "alertmanager_web_listen_address", "alertmanager_cluster_port"),
    "router": (
        "router_host",
        "router_port",
        "router_metrics_port",
        "router_model_ports",
        "router_door_metrics_port",
        "router_allowed_cidrs",
    ),
    "node_exporter": ("node_exporter_port",),
    "dcgm_exporter": ("dcgm_exporter_port",),
}
# Roles whose settings describe a Ray node (published as each node's settings); the others describe the monitoring
# hosts and routers.
NODE_ROLES = ("ray", "vllm", "preflight", "model")

# Settings every node of one cluster must share: Ray refuses mixed versions, and the head, the workers and the vLLM
# server find each other on these ports.
CLUSTER_UNIFORM = (
    ("ray_version", "vllm_version", "vllm_package", "ray_auth_mode", "vllm_serving_mode")
    + RAY_PORTS
    + ("vllm_port", "ray_serve_api_key_file")  # the one path in a Serve config, read on every node
)

# Inventory variables of the fleet model itself (no role default: computed here). The versions have no role
# default: they are required inventory settings.
PINNED_VERSIONS = ("ray_version", "vllm_version")
INPUTS = (
    "ray_cluster_name",
    "ray_node_ip",
    "ray_node_interface",
    "ray_dashboard_host",
    "vllm_served_model_name",
    "vllm_model_path",
    "vllm_pipeline_parallel_size",
    "vllm_max_model_len",
    "vllm_extra_args",
    "model_path",
    # A ray_serve cluster's key file when the inventory moves it (the ray_serve role's default is derived from
    # ray_config_dir, as the model's: see fleet_model/clusters.py).
    "ray_serve_api_key_file",
    # A ray_serve cluster's models: the GPUs a removal leaves must hold them (fleet_model/removal.py).
    "ray_serve_models",
) + PINNED_VERSIONS
# Secrets the model compares between hosts but never holds: the filter hands it a digest of each.
DIGESTS = ("vllm_api_key",)

SHARED_KEYS = tuple(key for keys in SHARED_SETTINGS.values() for key in keys)
NODE_KEYS = tuple(sorted(key for role in NODE_ROLES for key in SHARED_SETTINGS[role]))


def literal_defaults(role_defaults):
    """{variable: default} of SHARED_SETTINGS from {role: parsed defaults/main.yml}; a templated default is refused
    (it could only be rendered in its own role's context)."""
    result = {}
    for role, keys in SHARED_SETTINGS.items():
        declared = role_defaults.get(role) or {}
        for key in keys:
            if key not in declared:
                raise ValueError("%s is not declared in roles/%s/defaults/main.yml" % (key, role))
            value = declared[key]
            if isinstance(value, str) and "{{" in value:
                raise ValueError("%s in roles/%s/defaults/main.yml must be a literal to be shared" % (key, role))
            result[key] = value
    return result


def host_vars(hosts, host):
    """The inventory variables the filter handed over for ``host`` ({} when it handed none)."""
    info = hosts.get(host) if isinstance(hosts, dict) else None
    hvars = info.get("vars") if isinstance(info, dict) else None
    return hvars if isinstance(hvars, dict) else {}


def resolve(hosts, defaults, names):
    """{host: {setting: value}} for every host of ``names``: each shared setting from the host's inventory
    variables, else its role's default, and the model's own inputs (None when unset). The one place settings are
    resolved: every builder reads them from here."""
    result = {}
    for host in names:
        hvars = host_vars(hosts, host)
        settings = {key: hvars.get(key, defaults.get(key)) for key in SHARED_KEYS}
        settings.update((key, hvars.get(key)) for key in INPUTS + DIGESTS)
        result[host] = settings
    return result


# What each serving mode asks of the rest of the fleet, one row per mode (vllm_serving_mode; docs/architecture.md,
# "Adding a serving mode"): the roles read these through fleet_node.serving and never branch on the mode's name.
#   role: implements the serving interface (roles/serving: its serving_<operation>.yml files);
#   checks: the role whose validate.yml preflight runs on the cluster's nodes, beyond every node's ('' for none);
#   ray_extras: Ray's pip extras the mode needs, in Ray's venv and in vLLM's;
#   venv_requirements: more packages in vLLM's venv;
#   ray_environment: more environment of Ray's units (ray_environment still wins);
#   models_setting: the variable that lists the cluster's own models, which the stage play spreads over the fleet once
#     per model; '' - the cluster serves model_path, which the model role stages and links (serving.model_path);
#   stage: whether the mode stages anything of its own on every node (its role's serving_stage.yml, before anything
#     serving changes);
#   watchdog: whether vllm-watchdog guards the cluster's server;
#   vllm_port_metrics: whether Prometheus scrapes vLLM's metrics at the head's vllm_port (else the engines report
#     through Ray's metrics export port).
# And what only the fleet model reads (not published in fleet_node.serving):
#   key_file: where the key clients send lives on the head: (the setting that names the file, else (the directory
#     setting, the file's name) of its default), the whole file or its VLLM_API_KEY line (the router, status.yml);
#   server_args: whether the cluster's server takes vllm_extra_args (`vllm serve`'s flags: the router compares the
#     API flags of the clusters behind one model);
#   parallel_plan: "cluster" - one plan of vllm_tensor/pipeline_parallel_size for the cluster's engine; "models" - each
#     model of models_setting plans its own replicas;
#   ranks_restart_server: whether the server restarts when a node holding its ranks leaves (remove_node).
SERVING_MODES = {
    "vllm_serve": {
        "role": "rayvllm.fleet.vllm",
        "checks": "",
        "ray_extras": [],
        "venv_requirements": [],
        "ray_environment": {},
        "models_setting": "",
        "stage": False,
        "watchdog": True,
        "vllm_port_metrics": True,
        "key_file": ("", ("vllm_config_dir", "vllm.env")),
        "server_args": True,
        "parallel_plan": "cluster",
        "ranks_restart_server": True,
    },
    # Serve's controller and proxies run in Ray (the dashboard's Serve API answers 501 without them). Ray keeps no
    # idle worker (RAY_num_workers_soft_limit 0: one idle a second is ended): each replica's start runs Ray LLM's
    # tasks (initialize_remote_node, _get_vllm_engine_config) in workers of the vLLM venv that import vLLM and then
    # sat idle at about 700 MB each, one more per replica start up to the node's CPU count (6 on the sandbox's b
    # after its Serve stage's changes, 2026-11-28). Serve replaces a hung replica itself (its health check asks the
    # engine): no watchdog. venv_requirements: what `import ray.serve.llm` needs beyond ray[serve] and vLLM, the
    # [llm] extra's Requires-Dist in Ray's METADATA less vllm itself (the extra pins the CUDA `vllm`, not
    # vllm_package), the CUDA-only nixl wheels and the build tools (ninja, meson, pybind11); Ray 2.59/2.60 list the
    # same.
    "ray_serve": {
        "role": "rayvllm.fleet.ray_serve",
        "checks": "rayvllm.fleet.ray_serve",
        "ray_extras": ["serve"],
        "venv_requirements": [
            "pyarrow>=17.0.0", "pandas>=2.2.3", "fsspec", "jsonref>=1.1.0", "jsonschema", "typer", "hf_transfer",
        ],
        "ray_environment": {"RAY_num_workers_soft_limit": "0"},
        "models_setting": "ray_serve_models",
        "stage": True,
        "watchdog": False,
        "vllm_port_metrics": False,
        "key_file": ("ray_serve_api_key_file", ("ray_config_dir", "serve_api_key")),
        "server_args": False,
        "parallel_plan": "models",
        "ranks_restart_server": False,
    },
}  # fmt: skip


# The table's keys only the fleet model reads.
MODEL_ONLY = ("models_setting", "key_file", "server_args", "parallel_plan", "ranks_restart_server")


def mode_name(settings):
    """A node's serving mode: vllm_serving_mode, else the vllm role's default. The one place it is resolved."""
    return settings.get("vllm_serving_mode") or "vllm_serve"


def row(mode):
    """The row of SERVING_MODES of a mode (vllm_serve's for a mode the table lacks: preflight refuses it)."""
    return SERVING_MODES.get(mode, SERVING_MODES["vllm_serve"])


def mode_row(settings):
    """The row of SERVING_MODES of a node's settings."""
    return row(mode_name(settings))


def serving(settings):
    """What every serving mode of a node needs (roles/serving and the modes' implementations): the mode, resolved here
    once, and its row of SERVING_MODES; the models it stages beyond model_path (its models_setting's list); the vLLM
    venv of the node's pinned versions (the vllm role builds it: ``vllm serve`` runs from it, Ray Serve LLM's replicas
    run its python); the directory that keeps torch inductor's compiled kernels across restarts (in Ray's temp
    directory, writable in the Ray units on every node). No secret and no user environment: those stay in the roles'
    own variables. A mode SERVING_MODES lacks gets vllm_serve's row here: preflight refuses it (the vllm role's
    argument spec), before any host changes."""
    mode = mode_name(settings)
    mode_settings = row(mode)
    venv = "%s/%s-ray%s" % (
        settings.get("vllm_install_root"),
        settings.get("vllm_version"),
        settings.get("ray_version"),
    )
    models = settings.get(mode_settings["models_setting"]) if mode_settings["models_setting"] else None
    result = {key: copy.deepcopy(value) for key, value in mode_settings.items() if key not in MODEL_ONLY}
    result.update(
        {
            "mode": mode,
            "model_path": not mode_settings["models_setting"],
            "models": models if isinstance(models, list) else [],
            "venv": venv,
            "python": venv + "/bin/python",
            "compile_cache_dir": "%s/compile-cache/torchinductor" % settings.get("ray_temp_dir"),
        }
    )
    return result


def node_settings(settings):
    """The settings a Ray node publishes (fleet_node.settings): its Ray, vLLM, preflight and distribution settings,
    the pinned versions and model_path (preflight looks at what it is on the host)."""
    published = {key: settings.get(key) for key in NODE_KEYS}
    published.update((key, settings.get(key)) for key in PINNED_VERSIONS + ("model_path",))
    return published
