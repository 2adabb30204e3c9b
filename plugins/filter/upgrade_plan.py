# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The plan of one cluster's switch to staged versions (logic in module_utils/planners/upgrade_plan.py)."""


def upgrade_plan(nodes, cluster, outside=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.upgrade_plan import cluster_plan

    return cluster_plan(cluster, list(nodes), list(outside or []))


class FilterModule:
    def filters(self):
        return {"upgrade_plan": upgrade_plan}
