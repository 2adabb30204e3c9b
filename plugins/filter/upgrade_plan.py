# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The plan of one cluster's switch to staged versions, and the message of a failed switch (logic in
module_utils/upgrade_plan.py)."""


def upgrade_plan(nodes, cluster, outside=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.upgrade_plan import cluster_plan

    return cluster_plan(cluster, list(nodes), list(outside or []))


def upgrade_failure(failure, cluster, action, back="", router_model="", touched=False, rollback=True, **serving):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.upgrade_plan import failure_report

    return failure_report(failure, cluster, action, back, router_model, bool(touched), bool(rollback), **serving)["msg"]


class FilterModule:
    def filters(self):
        return {"upgrade_plan": upgrade_plan, "upgrade_failure": upgrade_failure}
