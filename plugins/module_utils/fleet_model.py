# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The fleet model: which Ray cluster each host belongs to, its head, its members,
each node's address and interface, and the settings other roles read across hosts.

Plain Python (no Ansible import): the filter ``rayvllm.fleet.fleet_model`` feeds it
the inventory's groups and each host's variables and facts; the unit tests feed it
dictionaries. Everything that must hold before any host changes is returned as a
list of problems, each naming the cluster, the hosts and the fix.
"""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.listen_address import listen_url

DEFAULT_CLUSTER = "default"
CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

# Ports Ray listens on at every node, and at a head only (checked free in preflight; firewall rules).
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

# Settings other roles read for hosts other than the one they run on (Prometheus scrapes
# every node, the vLLM server talks to its head, ...). Their defaults are read from the
# owning role's defaults/main.yml (the one place each is declared); inventory values win.
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
    "prometheus": ("prometheus_web_listen_address", "prometheus_scrape_interval", "prometheus_ray_head_metrics_ports"),
    "grafana": ("grafana_http_addr", "grafana_http_port"),
    "alertmanager": ("alertmanager_install_source", "alertmanager_web_listen_address", "alertmanager_cluster_port"),
    "router": ("router_host", "router_port", "router_metrics_port", "router_model_ports", "router_allowed_cidrs"),
    "node_exporter": ("node_exporter_port",),
    "dcgm_exporter": ("dcgm_exporter_port",),
}

# Settings every node of one cluster must share: Ray refuses mixed versions, and the
# head, the workers and the vLLM server find each other on these ports.
CLUSTER_UNIFORM = ("ray_version", "vllm_version", "vllm_package", "ray_auth_mode") + RAY_PORTS + ("vllm_port",)
# Ray's token authentication: the environment every Ray service and driver of a cluster needs.
RAY_AUTH_TOKEN_FILE = "auth_token"

# Inventory variables of the fleet model itself (no role default: computed here).
# The versions have no role default: they are required inventory settings.
PINNED_VERSIONS = ("ray_version", "vllm_version")
INPUTS = (
    "ray_cluster_name",
    "ray_node_ip",
    "ray_node_interface",
    "vllm_served_model_name",
    "vllm_model_path",
    "model_path",
) + PINNED_VERSIONS
# Where the vLLM API keys of clusters behind a router live (beside the inventory): one per routed model.
ROUTED_KEY_PREFIX = "router/"
# Roles whose settings describe a Ray node (the others, Prometheus and Grafana, describe the monitoring host).
NODE_ROLES = ("ray", "vllm", "preflight")


def interface_addresses(facts):
    """{interface device name: [IPv4 addresses]} from Ansible's network facts."""
    result = {}
    for name in facts.get("interfaces") or []:
        info = facts.get(name.replace("-", "_")) or facts.get(name) or {}
        if not isinstance(info, dict):
            continue
        addresses = []
        primary = (info.get("ipv4") or {}).get("address")
        if primary:
            addresses.append(primary)
        addresses.extend(a.get("address") for a in info.get("ipv4_secondaries") or [] if a.get("address"))
        if addresses:
            result[info.get("device", name)] = addresses
    return result


def _join(items):
    return ", ".join(str(i) for i in items)


def _variants(values):
    """'a on h1, h2; b on h3' for {host: value}."""
    by_value = {}
    for host, value in values.items():
        by_value.setdefault(repr(value) if isinstance(value, (dict, list)) else str(value), []).append(host)
    return "; ".join("%s on %s" % (value, _join(sorted(hosts))) for value, hosts in sorted(by_value.items()))


def _listen(host, port):
    """HOST:PORT as listen_url reads it (IPv6 in brackets; no host: every interface)."""
    host = "" if host is None else str(host)
    return "%s:%s" % ("[%s]" % host if ":" in host and not host.startswith("[") else host, port)


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


def build(heads, workers, hosts, defaults, monitoring=(), routers=()):
    """Build the fleet model.

    heads, workers: the inventory's ``ray_head`` and ``ray_workers`` groups (all hosts, not
    only those of the current run). hosts: {host: {"vars": {...}, "facts": {...},
    "ansible_host": str|None}} for every Ray node, monitoring and router host. defaults: the owning
    roles' literal defaults of SHARED_SETTINGS. monitoring: the ``monitoring`` group; routers: the
    ``router`` group.

    Returns (model, problems). model = {"clusters": {name: cluster}, "nodes": {host: node},
    "monitoring": {...}}; problems = [message, ...] (empty when the model is usable).
    """
    heads, workers = list(heads or []), list(workers or [])
    problems = []
    both = [h for h in heads if h in workers]
    if both:
        problems.append(
            "%s %s in both ray_head and ray_workers: a node is either its cluster's head or a worker. "
            "Remove it from one of the groups." % (_join(both), "is" if len(both) == 1 else "are")
        )

    if not heads and not workers:
        problems.append(
            "The inventory has no Ray node: put one host per cluster in ray_head, the others in ray_workers."
        )

    node_keys = sorted(k for role in NODE_ROLES for k in SHARED_SETTINGS[role])
    nodes = {}
    # By name, not inventory order: the files rendered from the model (Prometheus' targets, the router's
    # backends) stay the same when an inventory lists its hosts in another order (no change, no reload).
    for host in sorted(heads) + sorted(w for w in workers if w not in heads):
        info = hosts.get(host) or {}
        hvars = info.get("vars") or {}
        facts = info.get("facts") or {}
        cluster = hvars.get("ray_cluster_name")
        cluster = DEFAULT_CLUSTER if cluster in (None, "") else cluster
        if not isinstance(cluster, str) or not CLUSTER_NAME_RE.match(cluster):
            problems.append(
                "ray_cluster_name %r on %s is not a usable cluster name: use letters, digits, '.', '_' or '-' "
                "(it becomes the ray_cluster label of every metric)." % (cluster, host)
            )
            cluster = str(cluster)
        settings = {key: hvars.get(key, defaults.get(key)) for key in node_keys}
        settings.update((key, hvars.get(key)) for key in PINNED_VERSIONS)
        addresses = interface_addresses(facts)
        ip = hvars.get("ray_node_ip") or (facts.get("default_ipv4") or {}).get("address")
        interface = hvars.get("ray_node_interface") or next(
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
                % (ip, host, _join("%s %s" % (n, _join(a)) for n, a in sorted(addresses.items())) or "none")
            )
        role = "head" if host in heads else "worker"
        ports = RAY_NODE_PORTS + (RAY_HEAD_PORTS if role == "head" else ())
        nodes[host] = {
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
            "ray_ports": sorted(int(settings[p]) for p in ports if str(settings.get(p, "")).isdigit()),
            "settings": settings,
        }

    by_ip = {}
    for host, node in nodes.items():
        if node["ip"]:
            by_ip.setdefault(node["ip"], []).append(host)
    for ip, owners in sorted(by_ip.items()):
        if len(owners) > 1:
            problems.append(
                "%s share the address %s (ray_node_ip): every Ray node needs its own. Set ray_node_ip per host."
                % (_join(sorted(owners)), ip)
            )

    clusters = {}
    for host, node in nodes.items():
        cluster = clusters.setdefault(node["cluster"], {"name": node["cluster"], "heads": [], "workers": []})
        cluster["heads" if node["role"] == "head" else "workers"].append(host)

    for name, cluster in sorted(clusters.items()):
        if len(cluster["heads"]) > 1:
            problems.append(
                "cluster '%s' has %d heads (%s): a Ray cluster has exactly one. Keep one in ray_head and move the "
                "others to ray_workers, or give them their own ray_cluster_name."
                % (name, len(cluster["heads"]), _join(cluster["heads"]))
            )
        if not cluster["heads"]:
            problems.append(
                "cluster '%s' has workers (%s) but no head: put one of its hosts in ray_head, or set "
                "ray_cluster_name on the workers to the cluster of an existing head."
                % (name, _join(cluster["workers"]))
            )
        members = cluster["heads"] + cluster["workers"]
        for key in CLUSTER_UNIFORM:
            values = {h: nodes[h]["settings"].get(key) for h in members}
            if len(set(map(str, values.values()))) > 1:
                problems.append(
                    "cluster '%s': %s must be the same on every node, but it is %s. Set it once in the cluster's "
                    "group_vars, not per host." % (name, key, _variants(values))
                )

    model_clusters = {}
    for name, cluster in sorted(clusters.items()):
        if not cluster["heads"]:
            continue
        head = cluster["heads"][0]
        hs = nodes[head]["settings"]
        head_ip = nodes[head]["ip"]
        members = [head] + cluster["workers"]
        gpus = [nodes[h]["settings"].get("ray_num_gpus") for h in members]
        dashboard_host = (hosts.get(head, {}).get("vars") or {}).get("ray_dashboard_host")
        head_vars = hosts.get(head, {}).get("vars") or {}
        model_clusters[name] = {
            "name": name,
            # The name clients ask for: vllm_served_model_name, else the last part of the weights' path (the
            # vllm role's defaults: vllm_model_path, else model_path).
            "served_model_name": str(
                head_vars.get("vllm_served_model_name")
                or str(head_vars.get("vllm_model_path") or head_vars.get("model_path") or "")
                .rstrip("/")
                .rsplit("/", maxsplit=1)[-1]
            ),
            "head": head,
            "workers": list(cluster["workers"]),
            "hosts": members,
            "head_ip": head_ip,
            "gcs_address": "%s:%s" % (head_ip, hs.get("ray_gcs_port")),
            # Clients reach a server listening on every interface at the head's address.
            "dashboard_url": listen_url(_listen(dashboard_host, hs.get("ray_dashboard_port")), head_ip),
            "vllm_url": listen_url(_listen(hs.get("vllm_host"), hs.get("vllm_port")), head_ip),
            # Declared GPUs per node, head first (None where Ray detects them).
            "gpus_per_node": gpus,
            "declared_gpus": sum(int(g) for g in gpus if g not in (None, "")),
        }

    mon = list(monitoring or [])
    mon_model = {
        "host": "",
        "address": "",
        "prometheus_url": "",
        "prometheus_local_url": "",
        "prometheus_scrape_interval": "",
        "grafana_url": "",
        "addresses": {},
        "alertmanagers": [],
    }
    if mon:
        first = mon[0]
        address = _address(nodes, hosts, first)
        prometheus = _setting(hosts, first, "prometheus_web_listen_address", defaults)
        grafana = _listen(
            _setting(hosts, first, "grafana_http_addr", defaults), _setting(hosts, first, "grafana_http_port", defaults)
        )
        mon_model = {
            "host": first,
            "address": address,
            "prometheus_url": listen_url(prometheus, address),
            # The same Prometheus as its own host (Grafana beside it) reaches it.
            "prometheus_local_url": listen_url(prometheus, "127.0.0.1"),
            "prometheus_scrape_interval": _setting(hosts, first, "prometheus_scrape_interval", defaults),
            "grafana_url": listen_url(grafana, address),
            "addresses": {h: _address(nodes, hosts, h) for h in mon},
            # Every Prometheus sends its alerts to every Alertmanager (HOST:PORT).
            "alertmanagers": [
                "%s:%d" % (_address(nodes, hosts, h), _alertmanager_port(hosts, h, defaults))
                for h in mon
                if _alertmanager_port(hosts, h, defaults)
            ],
        }

    router_model, router_problems = build_routers(nodes, model_clusters, list(routers or []), hosts, defaults, mon)
    problems += router_problems
    for name, cluster in model_clusters.items():
        routed = cluster["served_model_name"] in router_model["models"]
        cluster["router_model"] = cluster["served_model_name"] if routed else ""
        # The vLLM API key's name beside the inventory (credentials/<name>/vllm_api_key): the cluster's own, or
        # the routed model's, shared by every cluster behind the router (it passes the client's key through).
        cluster["vllm_api_key_name"] = (
            ROUTED_KEY_PREFIX + router_model["models"][cluster["served_model_name"]]["instance"] if routed else name
        )
    firewall = firewall_exposure(nodes, model_clusters, mon, hosts, defaults, router_model)
    model = {"clusters": model_clusters, "nodes": nodes, "monitoring": mon_model, "firewall": firewall}
    model["routers"] = router_model
    return model, problems


INSTANCE_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def router_instance(model):
    """The name of a served model's router instance (systemd vllm-router@<instance>, file names)."""
    return INSTANCE_RE.sub("-", model).strip("-.") or "model"


def _router_ports(settings, models):
    """{model: (port, metrics_port)} from router_port/router_metrics_port (one model) or router_model_ports."""
    table = settings.get("router_model_ports") or {}
    if not table and len(models) == 1:
        return {models[0]: (settings.get("router_port"), settings.get("router_metrics_port"))}
    return {m: ((table.get(m) or {}).get("port"), (table.get(m) or {}).get("metrics_port")) for m in table}


def _is_port(value):
    return str(value).isdigit() and 0 < int(value) < 65536


def build_routers(nodes, clusters, routers, hosts, defaults, monitoring):
    """The router model and its problems.

    One vllm-router per served model on every host of the ``router`` group (vllm-router 0.1.17 sends
    a request to any of its workers whatever its "model" field says), its backends the vLLM URL of
    every cluster serving that model. Returns ({"hosts", "addresses", "models": {model: {...}}}, problems).
    """
    result = {"hosts": routers, "addresses": {}, "models": {}}
    if not routers:
        return result, []
    problems = []
    keys = SHARED_SETTINGS["router"]
    per_host = {h: {k: _setting(hosts, h, k, defaults) for k in keys} for h in routers}
    for key in keys:
        values = {h: per_host[h][key] for h in routers}
        if len(set(repr(v) for v in values.values())) > 1:
            problems.append(
                "the router hosts disagree on %s (%s): clients and the rollout treat them as one router. Set it once "
                "for the router group." % (key, _variants(values))
            )
    settings = per_host[routers[0]]
    result["addresses"] = {h: _address(nodes, hosts, h) for h in routers}
    served = {}
    for name, cluster in sorted(clusters.items()):
        served.setdefault(cluster["served_model_name"], []).append(name)
    if not served:
        problems.append(
            "the router group has hosts (%s) but the inventory serves no model: a router needs at least one cluster "
            "(ray_head) behind it." % _join(routers)
        )
        return result, problems
    table = settings.get("router_model_ports") or {}
    if not isinstance(table, dict):
        problems.append("router_model_ports must map served model names to {port, metrics_port}, got %r." % (table,))
        table = {}
        settings = dict(settings, router_model_ports={})
    ports = _router_ports(settings, sorted(served))
    if len(served) > 1 and not table:
        problems.append(
            "the clusters serve %d models (%s) and vllm-router routes one model per port (its regular mode ignores a "
            "request's model): set router_model_ports, e.g. {%s}."
            % (
                len(served),
                _join(sorted(served)),
                ", ".join(
                    "%s: {port: %d, metrics_port: %d}" % (m, 30000 + i, 29000 + i) for i, m in enumerate(sorted(served))
                ),
            )
        )
    for model in sorted(set(ports) - set(served)):
        problems.append(
            "router_model_ports names %s, which no cluster serves, so its router would have no backend (the clusters "
            "serve %s). Remove it or fix the name (vllm_served_model_name)." % (model, _join(sorted(served)))
        )
    for model in sorted(set(served) - set(ports)) if table else []:
        problems.append(
            "clusters %s serve %s but router_model_ports gives it no port: add %s: {port: ..., metrics_port: ...}."
            % (_join(served[model]), model, model)
        )
    # Every port a router host listens on, and who else wants it there.
    used = {}
    for model, (port, metrics) in sorted(ports.items()):
        for kind, value in (("router port", port), ("metrics port", metrics)):
            if not _is_port(value):
                problems.append("the %s of the %s router is %r: use a TCP port number." % (kind, model, value))
                continue
            used.setdefault(int(value), []).append("%s's %s" % (model, kind))
    instances = {}
    for model in served:
        instances.setdefault(router_instance(model), []).append(model)
    for instance, models in sorted(instances.items()):
        if len(models) > 1:
            problems.append(
                "served model names %s give one router instance name (%s): rename one (vllm_served_model_name)."
                % (_join(sorted(models)), instance)
            )
    for host in routers:
        taken = dict((p, [w]) for p, w in _host_ports(nodes, hosts, host, defaults, monitoring).items())
        for port, owners in sorted(used.items()):
            others = taken.get(port, [])
            if len(owners) + len(others) > 1:
                problems.append(
                    "port %d on router host %s is wanted by %s: give each its own port (router_port, "
                    "router_metrics_port, router_model_ports)." % (port, host, _join(owners + others))
                )
    for model, names in sorted(served.items()):
        if model not in ports:
            continue
        port, metrics = ports[model]
        result["models"][model] = {
            "model": model,
            "instance": router_instance(model),
            "port": int(port) if _is_port(port) else 0,
            "metrics_port": int(metrics) if _is_port(metrics) else 0,
            "clusters": names,
            "backends": [{"cluster": c, "url": clusters[c]["vllm_url"]} for c in names],
            # How clients reach it on each router host.
            "urls": {
                h: listen_url(_listen(settings.get("router_host"), port), result["addresses"][h]) for h in routers
            },
        }
    return result, problems


def _host_ports(nodes, hosts, host, defaults, monitoring):
    """{port: what} of the project's other services on a host (Ray, vLLM, exporters, monitoring)."""
    out = {int(_setting(hosts, host, "node_exporter_port", defaults)): "node exporter"}
    node = nodes.get(host)
    if node:
        out.update((p, "Ray") for p in node["ray_ports"])
        if node["role"] == "head":
            out[int(node["settings"]["vllm_port"])] = "vLLM"
    if host in monitoring:
        out[_port(_setting(hosts, host, "prometheus_web_listen_address", defaults))] = "Prometheus"
        out[int(_setting(hosts, host, "grafana_http_port", defaults))] = "Grafana"
        alertmanager = _alertmanager_port(hosts, host, defaults)
        if alertmanager:
            out[alertmanager] = "Alertmanager"
    return out


def _address(nodes, hosts, host):
    """Where others reach a host: its node address when it is a Ray node, else ansible_host, else its name."""
    return nodes[host]["ip"] if host in nodes else ((hosts.get(host) or {}).get("ansible_host") or host)


def _setting(hosts, host, key, defaults):
    return ((hosts.get(host) or {}).get("vars") or {}).get(key, defaults.get(key))


def _alertmanager_port(hosts, host, defaults):
    """The port of the Alertmanager the alertmanager role runs on a monitoring host; None where it runs none."""
    if _setting(hosts, host, "alertmanager_install_source", defaults) == "none":
        return None
    return _port(_setting(hosts, host, "alertmanager_web_listen_address", defaults))


def _port(listen):
    """The port of a HOST:PORT listen address."""
    return int(str(listen).rsplit(":", 1)[-1])


def firewall_exposure(nodes, clusters, monitoring, hosts, defaults, routers=None):
    """{host: {"members": [addresses with every port open], "services": [{"name", "ports", "sources", "admins"}]}}
    for every host of the fleet (Ray nodes and monitoring hosts): who, outside the host's cluster, reaches which
    of its ports. "admins": also the firewall role's admin networks. roles/firewall renders the rules."""

    prometheus = sorted({_address(nodes, hosts, h) for h in monitoring})
    heads = sorted(c["head_ip"] for c in clusters.values())
    routers = routers or {"hosts": [], "addresses": {}, "models": {}}
    # The routers reach the vLLM API of every cluster they route to (requests, probes).
    routed = {c for m in routers["models"].values() for c in m["clusters"]}
    router_addresses = sorted(set(routers["addresses"].values()))
    result = {}
    everyone = list(nodes) + [m for m in monitoring if m not in nodes]
    for host in everyone + [r for r in routers["hosts"] if r not in everyone]:
        services = [
            {"name": "node exporter", "ports": [int(_setting(hosts, host, "node_exporter_port", defaults))],
             "sources": prometheus, "admins": False},
        ]  # fmt: skip
        members = []
        node = nodes.get(host)
        if node:
            s = node["settings"]
            members = sorted(nodes[h]["ip"] for h in nodes if nodes[h]["cluster"] == node["cluster"] and h != host)
            services.append(
                {"name": "Ray metrics", "ports": [int(s["ray_metrics_export_port"])], "sources": prometheus,
                 "admins": False}
            )  # fmt: skip
            if s.get("preflight_gpu_check"):
                services.append(
                    {"name": "DCGM exporter", "ports": [int(_setting(hosts, host, "dcgm_exporter_port", defaults))],
                     "sources": prometheus, "admins": False}
                )  # fmt: skip
            if node["role"] == "head":
                head_metrics = (
                    _setting(hosts, monitoring[0], "prometheus_ray_head_metrics_ports", defaults)
                    if (monitoring)
                    else []
                )
                services += [
                    {"name": "vLLM API", "ports": [int(s["vllm_port"])],
                     "sources": sorted(set(s.get("vllm_allowed_cidrs") or []) | set(prometheus)
                                       | set(router_addresses if node["cluster"] in routed else [])), "admins": False},
                    {"name": "Ray dashboard", "ports": [int(s["ray_dashboard_port"])], "sources": [], "admins": True},
                    {"name": "Ray head metrics", "ports": sorted(int(p) for p in head_metrics or []),
                     "sources": prometheus, "admins": False},
                ]  # fmt: skip
        if host in monitoring:
            prom = _setting(hosts, host, "prometheus_web_listen_address", defaults)
            graf = _setting(hosts, host, "grafana_http_port", defaults)
            services += [
                # The Ray dashboards' Metrics tab queries Prometheus from each head.
                {"name": "Prometheus", "ports": [_port(prom)], "sources": heads, "admins": True},
                # ... and checks Grafana's health server-side before embedding its panels.
                {"name": "Grafana", "ports": [int(graf)], "sources": heads, "admins": True},
            ]
            alertmanager = _alertmanager_port(hosts, host, defaults)
            if alertmanager:
                others = [a for a in prometheus if a != _address(nodes, hosts, host)]
                # Every Prometheus of the fleet posts its alerts; operators read and silence them.
                services.append(
                    {"name": "Alertmanager", "sources": prometheus, "admins": True, "ports": [alertmanager]}
                )
                # Several Alertmanagers gossip (silences, who notified; TCP and UDP), so a notification goes out once.
                services += [
                    {"name": "Alertmanager cluster", "sources": others, "admins": False, "proto": proto,
                     "ports": [int(_setting(hosts, host, "alertmanager_cluster_port", defaults))] if others else []}
                    for proto in ("tcp", "udp")
                ]  # fmt: skip
        if host in routers["hosts"]:
            models = sorted(routers["models"].values(), key=lambda m: m["model"])
            allowed = _setting(hosts, host, "router_allowed_cidrs", defaults) or []
            services += [
                # Clients; operators may try it.
                {"name": "vLLM router", "ports": sorted(m["port"] for m in models if m["port"]),
                 "sources": sorted(set(allowed)), "admins": True},
                {"name": "vLLM router metrics", "ports": sorted(m["metrics_port"] for m in models if m["metrics_port"]),
                 "sources": prometheus, "admins": False},
            ]  # fmt: skip
        result[host] = {"members": members, "services": [svc for svc in services if svc["ports"]]}
    return result


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
                    "; ".join(
                        "%s on %s" % (label + (fmt % v), _join(sorted(hs))) for v, hs in sorted(by_value.items())
                    ),
                )
            )
    return out
