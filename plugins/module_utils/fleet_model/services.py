# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The one table of the fleet's services and their ports.

Every port a host of the fleet listens on comes from here: the collision checks (no two services of a host share a
port, none lies in Ray's worker range), the firewall's exposure (who reaches which port, fleet_model/exposure.py)
and the scrape targets (the model's ``ports``, read by roles/prometheus/templates/prometheus.yml.j2).
"""

from collections import namedtuple

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import values as checks
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import join

# key: the name in the model's ports; name: how messages and firewall comments call it; variables: the settings
# that give its ports; runs_on: which hosts (below); sources: who reaches it through the firewall (None: the
# members of the host's Ray cluster only, who reach every port: no opening of its own); admins: also the
# firewall's admin networks (firewall_admin_cidrs); protos: the protocols it listens on.
Service = namedtuple("Service", "key name variables runs_on sources admins protos")


def _service(key, name, variables, runs_on, sources=None, admins=False, protos=("tcp",)):
    return Service(key, name, variables, runs_on, sources, admins, protos)


# runs_on: "fleet" every host of the fleet (the node exporter runs on Ray nodes and routers; the firewall opens it
# everywhere), "node" every Ray node, "gpu_node" Ray nodes with preflight_gpu_check, "head" each cluster's head,
# "monitoring" the monitoring hosts, "alertmanager" those that run Alertmanager, "alertmanager_gossip" those, when
# there are several, "router" the router hosts (the front door, and a router port per served model).
# sources: "prometheus" the monitoring hosts, "vllm_clients" vllm_allowed_cidrs, the monitoring hosts and the
# routers of a routed cluster, "heads" every cluster's head, "other_prometheus" the other monitoring hosts,
# "router_clients" router_allowed_cidrs, "admins" the admin networks only, "nodes" the fleet's other Ray nodes.
# The order is the order of the firewall's openings.
SERVICES = (
    _service("node_exporter", "node exporter", ("node_exporter_port",), "fleet", "prometheus"),
    _service("ray_metrics", "Ray metrics", ("ray_metrics_export_port",), "node", "prometheus"),
    _service("dcgm_exporter", "DCGM exporter", ("dcgm_exporter_port",), "gpu_node", "prometheus"),
    _service("vllm", "vLLM API", ("vllm_port",), "head", "vllm_clients"),
    _service("ray_dashboard", "Ray dashboard", ("ray_dashboard_port",), "head", "admins", admins=True),
    # Ray's own autoscaler and dashboard metrics ports: the first monitoring host's list tells Prometheus and the
    # firewall (the firewall opens them only when there is a monitoring host).
    _service("ray_head_metrics", "Ray head metrics", ("prometheus_ray_head_metrics_ports",), "head", "prometheus"),
    _service("prometheus", "Prometheus", ("prometheus_web_listen_address",), "monitoring", "heads", admins=True),
    _service("grafana", "Grafana", ("grafana_http_port",), "monitoring", "heads", admins=True),
    _service(
        "alertmanager", "Alertmanager", ("alertmanager_web_listen_address",), "alertmanager", "prometheus", admins=True
    ),  # fmt: skip
    _service(
        "alertmanager_cluster",
        "Alertmanager cluster",
        ("alertmanager_cluster_port",),
        "alertmanager_gossip",
        "other_prometheus",
        protos=("tcp", "udp"),
    ),  # fmt: skip
    # The front door (HAProxy: every served model at one URL) and behind it one vllm-router per model, each on a port of
    # its own (router_model_ports, else the ports after router_port and router_metrics_port).
    _service("front_door", "front door", ("router_port",), "router", "router_clients", admins=True),
    _service("door_metrics", "front door metrics", ("router_door_metrics_port",), "router", "prometheus"),
    _service("router", "vLLM router", ("router_model_ports",), "router", "router_clients", admins=True),
    _service(
        "router_metrics", "vLLM router metrics", ("router_metrics_port", "router_model_ports"), "router", "prometheus"
    ),  # fmt: skip
    # Each node serves the weights to its peers while a revision is spread (roles/model, model_distribution: peers);
    # a peer of another cluster may serve them (model_distribution_scope: fleet).
    _service("model_share", "weights sharing", ("model_distribution_port",), "node", "nodes"),
    _service("ray_gcs", "Ray GCS", ("ray_gcs_port",), "head"),
    _service("ray_client_server", "Ray client server", ("ray_client_server_port",), "head"),
    _service("ray_node_manager", "Ray node manager", ("ray_node_manager_port",), "node"),
    _service("ray_object_manager", "Ray object manager", ("ray_object_manager_port",), "node"),
    _service("ray_dashboard_agent", "Ray dashboard agent", ("ray_dashboard_agent_listen_port",), "node"),
    _service("ray_dashboard_agent_grpc", "Ray dashboard agent (gRPC)", ("ray_dashboard_agent_grpc_port",), "node"),
    _service("ray_runtime_env_agent", "Ray runtime-env agent", ("ray_runtime_env_agent_port",), "node"),
    # A range: its first and last port (Ray starts a worker process on each).
    _service("ray_workers", "Ray worker ports", ("ray_min_worker_port", "ray_max_worker_port"), "node"),
)
BY_KEY = {s.key: s for s in SERVICES}
RANGE = "ray_workers"
PLACEHOLDER = "\x00"


def runs_on(fleet, service, host):
    """Whether ``service`` runs on ``host``."""
    node = fleet.nodes.get(host)
    where = service.runs_on
    if where == "fleet":
        return True
    if where == "node":
        return node is not None
    if where == "gpu_node":
        return node is not None and checks.truthy(fleet.setting(host, "preflight_gpu_check"))
    if where == "head":
        return node is not None and node["role"] == "head"
    if where == "monitoring":
        return host in fleet.monitoring
    if where in ("alertmanager", "alertmanager_gossip"):
        if host not in fleet.monitoring or fleet.setting(host, "alertmanager_install_source") == "none":
            return False
        return where == "alertmanager" or any(fleet.address(m) != fleet.address(host) for m in fleet.monitoring)
    if where == "router":
        return host in fleet.routers
    return False


class BadValues:
    """Unusable port settings, one message per variable and value, naming every host that has it."""

    def __init__(self):
        self.messages = {}

    def check(self, check, name, value, host, *args):
        found = []
        result = check(found, name, value, "on " + PLACEHOLDER, *args)
        for message in found:
            self.messages.setdefault(message, []).append(host)
        return result

    def problems(self):
        return [m.replace(PLACEHOLDER, join(sorted(set(hosts)))) for m, hosts in self.messages.items()]


def _head_metrics_ports(fleet, bad, host):
    source = fleet.monitoring[0] if fleet.monitoring else None
    value = fleet.setting(source, "prometheus_ray_head_metrics_ports") if source else fleet.defaults.get(
        "prometheus_ray_head_metrics_ports")  # fmt: skip
    where_host = source or host
    if not isinstance(value, (list, tuple)):
        bad.check(checks.string_list, "prometheus_ray_head_metrics_ports", value, where_host, "[44217, 44227]")
        return []
    ports = [bad.check(checks.port, "prometheus_ray_head_metrics_ports", p, where_host) for p in value]
    return [p for p in ports if p is not None]


def _claims(fleet, bad, service, host):
    """[(port, label)] of ``service`` on ``host`` (valid ports only; the unusable ones are in ``bad``)."""
    label = "%s (%s)" % (service.name, service.variables[0])
    if service.key == "ray_head_metrics":
        return [(p, label) for p in _head_metrics_ports(fleet, bad, host)]
    if service.key in ("router", "router_metrics"):
        kind = "router port" if service.key == "router" else "metrics port"
        field = "port" if service.key == "router" else "metrics_port"
        return [
            (m[field], "%s's %s" % (m["model"], kind))
            for m in sorted(fleet.router_model["models"].values(), key=lambda m: m["model"])
            if m[field]
        ]
    if service.key in ("prometheus", "alertmanager"):
        variable = service.variables[0]
        found = bad.check(checks.listen_address, variable, fleet.setting(host, variable), host,
                          "0.0.0.0:%d" % (9090 if service.key == "prometheus" else 9093))  # fmt: skip
        return [(found[1], label)] if found else []
    found = [(bad.check(checks.port, v, fleet.setting(host, v), host), v) for v in service.variables]
    return [(p, "%s (%s)" % (service.name, v)) for p, v in found if p is not None]


def build_ports(fleet):
    """fleet.ports: {host: {service key: [ports]}} for every host of the fleet, in the table's order (the worker
    range as its first and last port), and the problems: unusable port values, a worker range that is empty, two
    services of one host on one port, a port inside Ray's worker range."""
    bad = BadValues()
    for host in sorted(fleet.names):
        claims, ports = [], {}
        worker_range = None
        for service in SERVICES:
            if not runs_on(fleet, service, host):
                continue
            found = _claims(fleet, bad, service, host)
            if service.key == RANGE:
                if len(found) == 2 and found[0][0] <= found[1][0]:
                    worker_range = (found[0][0], found[1][0])
                    ports[service.key] = [found[0][0], found[1][0]]
                continue
            if found:
                ports[service.key] = sorted({p for p, _label in found})
                claims.extend((p, lbl, service) for p, lbl in found)
        fleet.ports[host] = ports
        _collisions(fleet, host, claims, worker_range)
    # Each unusable value once, naming every host that has it (a port of 70000 was dropped here before: accepted).
    fleet.problems.extend(bad.problems())


def _on_router_port(service):
    """The front door, a model's router or its metrics: the ports router_port, router_metrics_port and
    router_model_ports give."""
    return service.key in ("front_door", "door_metrics") or service.key.startswith("router")


def _collisions(fleet, host, claims, worker_range):
    """Two services of the host on one port, and a port inside the host's Ray worker range (Ray starts a worker
    process on each port of the range)."""
    by_port = {}
    for port, label, service in claims:
        owners = by_port.setdefault(port, [])
        if label not in [o[0] for o in owners]:
            owners.append((label, service))
    for port, owners in sorted(by_port.items()):
        if len(owners) < 2:
            continue
        if any(_on_router_port(s) for _label, s in owners):
            # The door's and the routers' own ports first, by model.
            owners = sorted(owners, key=lambda o: not _on_router_port(o[1]))
            labels = [label for label, _service in owners]
            fleet.problems.append(
                "port %d on router host %s is wanted by %s: give each its own port (router_port, "
                "router_metrics_port, router_model_ports, router_door_metrics_port)." % (port, host, join(labels))
            )
            continue
        fleet.problems.append(
            "port %d on %s is wanted by %s: give each service of a host its own port (set one of %s)."
            % (port, host, join(label for label, _s in owners), join(sorted({s.variables[0] for _l, s in owners})))
        )
    if worker_range:
        low, high = worker_range
        for port, label in sorted({(p, lbl) for p, lbl, _s in claims if low <= p <= high}):
            fleet.problems.append(
                "port %d of the %s on %s lies in Ray's worker port range %d-%d (ray_min_worker_port, "
                "ray_max_worker_port): Ray starts worker processes there. Move the port or the range."
                % (port, label, host, low, high)
            )
