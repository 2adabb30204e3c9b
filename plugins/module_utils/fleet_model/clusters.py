# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The Ray nodes and clusters of the fleet model: which cluster each host belongs to, its head, its members, each
node's address and interface, and the GPUs each cluster declares."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import values as checks
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import join, url, variants
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_facts import interface_addresses
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import (
    CLUSTER_UNIFORM,
    RAY_HEAD_PORTS,
    RAY_NODE_PORTS,
    mode_row,
    node_settings,
    serving,
)

DEFAULT_CLUSTER = "default"
CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# Ray's token authentication: the environment every Ray service and driver of a cluster needs.
RAY_AUTH_TOKEN_FILE = "auth_token"


def network_env(ip, interface):
    """VLLM_HOST_IP and, when the interface is known, GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME."""
    env = {"VLLM_HOST_IP": ip or ""}
    if interface:
        env.update(GLOO_SOCKET_IFNAME=interface, NCCL_SOCKET_IFNAME=interface)
    return env


def auth_env(settings):
    """RAY_AUTH_MODE and, with token auth, RAY_AUTH_TOKEN_PATH (a file, so the token never shows in
    `systemctl show` or a process listing). The mode is always explicit: Ray 2.61 turns token auth on
    by default, and a cluster that says "disabled" must stay so across that upgrade."""
    mode = settings.get("ray_auth_mode")
    if mode != "token":
        return {"RAY_AUTH_MODE": str(mode)}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": ray_auth_token_path(settings)}


def ray_auth_token_path(settings):
    """Where the cluster's token lives on every node ("" when token auth is off)."""
    if settings.get("ray_auth_mode") != "token":
        return ""
    return "%s/%s" % (str(settings.get("ray_config_dir")).rstrip("/"), RAY_AUTH_TOKEN_FILE)


def _node(fleet, host, role):
    """One Ray node's entry of the model, its problems added to the fleet's."""
    problems = fleet.problems
    settings = fleet.settings[host]
    facts = fleet.facts(host)
    where = "on %s" % host
    cluster = settings.get("ray_cluster_name")
    cluster = DEFAULT_CLUSTER if cluster in (None, "") else cluster
    if not isinstance(cluster, str) or not CLUSTER_NAME_RE.match(cluster):
        problems.append(
            "ray_cluster_name %r on %s is not a usable cluster name: use letters, digits, '.', '_' or '-' "
            "(it becomes the ray_cluster label of every metric)." % (cluster, host)
        )
        cluster = str(cluster)
    addresses = interface_addresses(facts)
    ip = settings.get("ray_node_ip") or (facts.get("default_ipv4") or {}).get("address")
    if ip is not None and not isinstance(ip, str):
        problems.append(
            "ray_node_ip on %s is %r, not an address: set it to the host's IPv4 address as a string, e.g. "
            '"10.0.0.11".' % (host, ip)
        )
        ip = str(ip)
    interface = settings.get("ray_node_interface") or next(
        (name for name, addrs in sorted(addresses.items()) if ip in addrs), None
    )
    if not ip:
        problems.append(
            "%s has no default IPv4 address: set ray_node_ip to the address it uses for the cluster network." % host
        )
    elif facts and not any(ip in addrs for addrs in addresses.values()):
        problems.append(
            "ray_node_ip %s is on no interface of %s (its addresses: %s): Ray, vLLM and NCCL would advertise an "
            "address nobody reaches. Set ray_node_ip to one of its addresses."
            % (ip, host, join("%s %s" % (n, join(a)) for n, a in sorted(addresses.items())) or "none")
        )
    explicit = settings.get("ray_node_interface")
    if explicit is not None and facts:
        if not isinstance(explicit, str) or explicit not in addresses:
            problems.append(
                "ray_node_interface %r on %s is not an interface of the host with an IPv4 address (those: %s): NCCL "
                "and Gloo would bind to an interface that is not there. Set it to the interface that holds ray_node_ip "
                "%s, or remove it to have it found from the address."
                % (explicit, host, join("%s %s" % (n, join(a)) for n, a in sorted(addresses.items())) or "none", ip)
            )
        elif ip and ip not in addresses[explicit]:
            problems.append(
                "ray_node_ip %s is not on ray_node_interface %s of %s (whose addresses are %s): Ray would advertise "
                "one network while NCCL and Gloo use another. Set one to match the other."
                % (ip, explicit, host, join(addresses[explicit]))
            )
    ports = RAY_NODE_PORTS + (RAY_HEAD_PORTS if role == "head" else ())
    return {
        "cluster": cluster,
        "role": role,
        "ip": ip or "",
        "interface": interface or "",
        # Multi-NIC servers: the environment that keeps vLLM (VLLM_HOST_IP) and torch.distributed/NCCL
        # (GLOO_/NCCL_SOCKET_IFNAME) on the node's cluster address; the Ray and vLLM services both get it.
        "network_env": network_env(ip, interface),
        # Ray token authentication for the Ray services and every driver (vLLM); the token file's path.
        "auth_env": auth_env(settings),
        "ray_auth_token_file": ray_auth_token_path(settings),
        # Ports Ray listens on at this node (checked free in preflight; firewall rules).
        "ray_ports": sorted(int(settings[p]) for p in ports if checks.port([], p, settings.get(p), where)),
        "settings": node_settings(settings),
        "serving": serving(settings),
    }


def build_nodes(fleet):
    """fleet.nodes: every Ray node, by name (not inventory order: the files rendered from the model, Prometheus'
    targets and the router's backends, stay the same when an inventory lists its hosts in another order)."""
    both = [h for h in fleet.heads if h in fleet.workers]
    if both:
        fleet.problems.append(
            "%s %s in both ray_head and ray_workers: a node is either its cluster's head or a worker. "
            "Remove it from one of the groups." % (join(both), "is" if len(both) == 1 else "are")
        )
    if not fleet.heads and not fleet.workers:
        fleet.problems.append(
            "The inventory has no Ray node: put one host per cluster in ray_head, the others in ray_workers."
        )
    for host in sorted(set(fleet.heads)) + sorted(set(w for w in fleet.workers if w not in fleet.heads)):
        fleet.nodes[host] = _node(fleet, host, "head" if host in fleet.heads else "worker")

    by_ip = {}
    for host, node in fleet.nodes.items():
        if node["ip"]:
            by_ip.setdefault(node["ip"], []).append(host)
    for ip, owners in sorted(by_ip.items(), key=lambda item: str(item[0])):
        if len(owners) > 1:
            fleet.problems.append(
                "%s share the address %s (ray_node_ip): every Ray node needs its own. Set ray_node_ip per host."
                % (join(sorted(owners)), ip)
            )


def _served_model_name(settings):
    """The name clients ask for: vllm_served_model_name, else the last part of the weights' path (the vllm role's
    defaults: vllm_model_path, else model_path)."""
    name = settings.get("vllm_served_model_name")
    if name not in (None, ""):
        return name
    path = settings.get("vllm_model_path") or settings.get("model_path") or ""
    return str(path).rstrip("/").rsplit("/", maxsplit=1)[-1]


def _served_models(fleet, name, settings):
    """(the cluster's model for clients and the router, every model it serves). A cluster whose mode serves models of
    its own (models_setting: a ray_serve cluster's ray_serve_models): vllm_served_model_name, when set, must be one of
    them; else the name from the weights' path when it is one, else the first."""
    served = str(_served_model_name(settings))
    models_setting = mode_row(settings)["models_setting"]
    if not models_setting:
        return served, [served]
    models = settings.get(models_setting)
    names = (
        [str(m["name"]) for m in models if isinstance(m, dict) and m.get("name")] if isinstance(models, list) else []
    )
    if not names:
        return served, [served]  # the ray_serve role's input checks name a cluster without models
    if settings.get("vllm_served_model_name") not in (None, "") and served not in names:
        fleet.problems.append(
            "cluster '%s' serves %s through Ray Serve LLM (%s) but vllm_served_model_name is %s: the "
            "router and status.yml ask the cluster for it. Set vllm_served_model_name to one of its models, or leave "
            "it unset (the first model then)." % (name, join(names), models_setting, served)
        )
    return (served if served in names else names[0]), names


def build_clusters(fleet):
    """fleet.clusters: each cluster with a head (the heads, members, addresses and URLs), and the problems of
    membership and of settings that differ inside a cluster."""
    groups = {}
    for host, node in fleet.nodes.items():
        group = groups.setdefault(node["cluster"], {"heads": [], "workers": []})
        group["heads" if node["role"] == "head" else "workers"].append(host)

    for name, group in sorted(groups.items()):
        if len(group["heads"]) > 1:
            fleet.problems.append(
                "cluster '%s' has %d heads (%s): a Ray cluster has exactly one. Keep one in ray_head and move the "
                "others to ray_workers, or give them their own ray_cluster_name."
                % (name, len(group["heads"]), join(group["heads"]))
            )
        if not group["heads"]:
            fleet.problems.append(
                "cluster '%s' has workers (%s) but no head: put one of its hosts in ray_head, or set "
                "ray_cluster_name on the workers to the cluster of an existing head." % (name, join(group["workers"]))
            )
        members = group["heads"] + group["workers"]
        for key in CLUSTER_UNIFORM:
            values = {h: fleet.settings[h].get(key) for h in members}
            if len(set(map(str, values.values()))) > 1:
                fleet.problems.append(
                    "cluster '%s': %s must be the same on every node, but it is %s. Set it once in the cluster's "
                    "group_vars, not per host." % (name, key, variants(values))
                )

    for name, group in sorted(groups.items()):
        if not group["heads"]:
            continue
        head = group["heads"][0]
        hs = fleet.settings[head]
        head_ip = fleet.nodes[head]["ip"]
        members = [head] + group["workers"]
        gpus = [fleet.settings[h].get("ray_num_gpus") for h in members]
        where = "on %s" % head
        gcs = checks.port([], "ray_gcs_port", hs.get("ray_gcs_port"), where)
        dashboard_host = hs.get("ray_dashboard_host")
        served, served_models = _served_models(fleet, name, hs)
        fleet.clusters[name] = {
            "name": name,
            # The model clients and the router ask this cluster for; every model it serves (a ray_serve cluster's
            # ray_serve_models, status.yml asks each).
            "served_model_name": served,
            "served_models": served_models,
            "head": head,
            "workers": list(group["workers"]),
            "hosts": members,
            "head_ip": head_ip,
            "gcs_address": "%s:%s" % (head_ip, gcs if gcs is not None else hs.get("ray_gcs_port")),
            # Clients reach a server listening on every interface at the head's address.
            "dashboard_url": url(
                dashboard_host if isinstance(dashboard_host, str) else None,
                checks.port([], "ray_dashboard_port", hs.get("ray_dashboard_port"), where),
                head_ip,
            ),
            "vllm_url": url(
                hs.get("vllm_host") if isinstance(hs.get("vllm_host"), str) else None,
                checks.port([], "vllm_port", hs.get("vllm_port"), where),
                head_ip,
            ),
            # The file on the head that holds the key clients send (the router, status.yml and smoke.yml read it
            # there): vLLM's environment file (its VLLM_API_KEY line), or on a ray_serve cluster the file Serve's
            # ingress reads (the whole file; the ray_serve role's ray_serve_api_key_file).
            "api_key_file": _api_key_file(hs),
            # Declared GPUs per node, head first (None where Ray detects them).
            "gpus_per_node": gpus,
            "declared_gpus": sum(_gpu_count(g) for g in gpus),
        }


def _api_key_file(settings):
    """The mode's key file (its key_file): the setting that names it, when the inventory sets it (the ray_serve role's
    ray_serve_api_key_file), else its default in the directory setting's directory (<ray_config_dir>/serve_api_key,
    <vllm_config_dir>/vllm.env)."""
    setting, (directory, name) = mode_row(settings)["key_file"]
    return (settings.get(setting) if setting else None) or "%s/%s" % (settings.get(directory), name)


def _gpu_count(value):
    """GPUs a node declares (ray_num_gpus); 0 for an unusable value, which the ray role's input checks name."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def mixed_within_clusters(values, clusters, label="", fmt="%s"):
    """For {host: value} and {host: cluster}: one message per cluster whose hosts disagree,
    e.g. "cluster 'a': Python 3.11.2 on h1, h2; Python 3.12.1 on h3"."""
    out = []
    for name in sorted(set(clusters.values())):
        members = {h: v for h, v in values.items() if clusters.get(h) == name}
        if len(set(map(str, members.values()))) > 1:
            by_value = {}
            for host, value in members.items():
                by_value.setdefault(str(value), []).append(host)
            out.append(
                "cluster '%s': %s"
                % (
                    name,
                    "; ".join("%s on %s" % (label + (fmt % v), join(sorted(hs))) for v, hs in sorted(by_value.items())),
                )
            )
    return out
