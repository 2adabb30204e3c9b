# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The fleet model: which Ray cluster each host belongs to, its head, its members, every host's address, the
services and ports of every host, and the settings other roles read across hosts.

Plain Python (no Ansible import): the filter ``rayvllm.fleet.fleet_model`` feeds it the inventory's groups and each
host's variables and facts; the unit tests feed it dictionaries. Everything that must hold before any host changes
is returned as a list of problems, each naming the variable, the cluster or host, the value and the fix; whatever
the inventory holds, ``build`` returns a model and problems and never raises.

The package, in the order ``build`` runs it:

- ``settings``: every setting resolved once for every host of the fleet (the inventory's value, else the owning
  role's default);
- ``clusters``: the Ray nodes (address, interface, environment) and clusters (head, members, URLs, GPUs);
- ``routers``: one vllm-router per served model, its backends;
- ``services``: the one table of services and their ports, the ports of every host and their collisions;
- ``monitoring``: where Prometheus, Grafana and the Alertmanagers are reached;
- ``exposure``: who reaches which port of each host through the firewall;
- ``removal``: the fleet without the nodes that leave it (playbooks/remove_node.yml).
"""

from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.clusters import (  # noqa: F401
    DEFAULT_CLUSTER,
    auth_env,
    build_clusters,
    build_nodes,
    interface_addresses,
    mixed_within_clusters,
    network_env,
    ray_auth_token_path,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import Fleet
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.exposure import build_exposure
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.monitoring import build_monitoring
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.removal import build_without
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.routers import (  # noqa: F401
    ROUTED_KEY_PREFIX,
    build_routers,
    router_instance,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.services import (  # noqa: F401
    SERVICES,
    build_ports,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import (  # noqa: F401
    CLUSTER_UNIFORM,
    DIGESTS,
    INPUTS,
    PINNED_VERSIONS,
    RAY_HEAD_PORTS,
    RAY_NODE_PORTS,
    RAY_PORTS,
    SHARED_SETTINGS,
    literal_defaults,
)


def build(heads, workers, hosts, defaults, monitoring=(), routers=(), leaving=None):
    """Build the fleet model.

    heads, workers: the inventory's ``ray_head`` and ``ray_workers`` groups (all hosts, not only those of the
    current run). hosts: {host: {"vars": {...}, "facts": {...}, "ansible_host": str|None}} for every Ray node,
    monitoring and router host. defaults: the owning roles' literal defaults of SHARED_SETTINGS. monitoring: the
    ``monitoring`` group; routers: the ``router`` group.

    Returns (model, problems). model = {"clusters": {name: cluster}, "nodes": {host: node}, "monitoring": {...},
    "routers": {...}, "firewall": {host: exposure}, "addresses": {host: address}, "ports": {host: {service:
    [ports]}}}; problems = [message, ...] (empty when the model is usable).

    leaving: the hosts of ``remove_nodes`` (playbooks/remove_node.yml): the model is then the fleet's without them,
    plus ``leaving`` and ``removal`` (see removal.build_without), and the problems name a removal that cannot be done.
    """
    if leaving not in (None, "", []):
        return build_without(build, leaving, heads, workers, hosts, defaults, monitoring, routers)
    fleet = Fleet(heads, workers, hosts, defaults, monitoring, routers)
    build_nodes(fleet)
    build_clusters(fleet)
    fleet.addresses = {h: fleet.address(h) for h in sorted(fleet.names)}
    build_routers(fleet)
    build_ports(fleet)
    model = {
        "clusters": fleet.clusters,
        "nodes": fleet.nodes,
        "monitoring": build_monitoring(fleet),
        "firewall": build_exposure(fleet),
        "routers": fleet.router_model,
        # Where others reach each host of the fleet (its node address, else ansible_host, else its name).
        "addresses": fleet.addresses,
        # The ports of each host's services (services.SERVICES), by service.
        "ports": fleet.ports,
    }
    return model, fleet.problems
