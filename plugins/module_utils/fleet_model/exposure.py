# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The firewall's exposure: who, outside a host's Ray cluster, reaches which of its ports. roles/firewall renders
the rules (plugins/module_utils/planners/firewall.py); the ports come from the services table (services.py)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import values as checks
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.services import SERVICES, BadValues, runs_on


def _cidrs(fleet, bad, host, name):
    """A list of networks as given (the firewall role checks each); a string alone is refused here, naming the
    setting (it was read character by character: "'a' is not an IP address" for vllm_allowed_cidrs: any)."""
    value = fleet.setting(host, name)
    if value is None:
        return []
    return bad.check(checks.string_list, name, value, host, "[10.0.0.0/8]") or []


def build_exposure(fleet):
    """{host: {"members": [addresses with every port open], "services": [{"name", "ports", "sources", "admins",
    "proto"?}]}} for every host of the fleet (Ray nodes, monitoring hosts, routers). "admins": also the firewall
    role's admin networks."""
    prometheus = sorted({fleet.address(h) for h in fleet.monitoring})
    heads = sorted(c["head_ip"] for c in fleet.clusters.values())
    routers = fleet.router_model
    # The routers reach the vLLM API of every cluster they route to (requests, probes).
    routed = {c for m in routers["models"].values() for c in m["clusters"]}
    router_addresses = sorted(set(routers["addresses"].values()))
    result, bad = {}, BadValues()
    everyone = list(fleet.nodes) + [m for m in fleet.monitoring if m not in fleet.nodes]
    for host in everyone + [r for r in fleet.routers if r not in everyone]:
        node = fleet.nodes.get(host)
        own = fleet.address(host)
        sources = {
            "prometheus": prometheus,
            "heads": heads,
            "admins": [],
            "other_prometheus": [a for a in prometheus if a != own],
            # The Ray nodes of the other clusters (the host's own cluster reaches every port).
            "nodes": sorted(
                {n["ip"] for n in fleet.nodes.values() if n["ip"] and not (node and n["cluster"] == node["cluster"])}
                - {own}
            ),
            "router_clients": sorted(set(_cidrs(fleet, bad, host, "router_allowed_cidrs")))
            if host in fleet.routers
            else [],
        }
        if node and node["role"] == "head":
            sources["vllm_clients"] = sorted(
                set(_cidrs(fleet, bad, host, "vllm_allowed_cidrs"))
                | set(prometheus)
                | set(router_addresses if node["cluster"] in routed else [])
            )
        services = []
        for service in SERVICES:
            if service.sources is None or not runs_on(fleet, service, host):
                continue
            if service.sources == "nodes" and not sources["nodes"]:
                continue  # one cluster: its members reach every port
            ports = list(fleet.ports.get(host, {}).get(service.key, []))
            if service.key == "ray_head_metrics" and not fleet.monitoring:
                ports = []  # nothing scrapes them
            for proto in service.protos:
                entry = {"name": service.name, "ports": ports, "sources": sources[service.sources],
                         "admins": service.admins}  # fmt: skip
                if len(service.protos) > 1:
                    entry["proto"] = proto
                services.append(entry)
        members = []
        if node:
            members = sorted(
                fleet.nodes[h]["ip"] for h in fleet.nodes if fleet.nodes[h]["cluster"] == node["cluster"] and h != host
            )
        result[host] = {"members": members, "services": [svc for svc in services if svc["ports"]]}
    fleet.problems.extend(bad.problems())
    return result
