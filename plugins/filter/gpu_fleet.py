# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Fleet-wide GPU checks over the per-host results of rayvllm.fleet.gpu_topology."""

from ansible.errors import AnsibleFilterError


def gpu_fleet_problems(reports, tensor_parallel_size=0, allow_cross_node_tp=False, require_nvlink=False):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.gpu_topology import fleet_problems

    if not isinstance(reports, dict):
        raise AnsibleFilterError("gpu_fleet_problems expects a dict {host: gpu_topology result}")
    try:
        return fleet_problems(
            reports,
            tensor_parallel_size=int(tensor_parallel_size or 0),
            allow_cross_node_tp=bool(allow_cross_node_tp),
            require_nvlink=bool(require_nvlink),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpu_fleet_problems: %s" % exc)


def gpu_needs_fabric_manager(facts):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.gpu_topology import needs_fabric_manager

    try:
        return needs_fabric_manager(facts)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("gpu_needs_fabric_manager expects a gpu_topology result: %s" % exc)


class FilterModule:
    def filters(self):
        return {
            "gpu_fleet_problems": gpu_fleet_problems,
            "gpu_needs_fabric_manager": gpu_needs_fabric_manager,
        }
