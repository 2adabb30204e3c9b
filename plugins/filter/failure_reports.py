# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The messages a failed serving change ends the run with (logic in module_utils/planners/failure_reports.py)."""


def upgrade_failure(failure, cluster, action, back="", router_model="", touched=False, rollback=True, **serving):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.failure_reports import switch_failure

    return switch_failure(failure, cluster, action, back, router_model, bool(touched), bool(rollback), **serving)["msg"]


def ray_serve_failure(failure, cluster, sent, rollback=True, rolled_back=False, previous_models=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.failure_reports import serve_failure

    return serve_failure(failure, cluster, bool(sent), bool(rollback), bool(rolled_back), list(previous_models or []))[
        "msg"
    ]


class FilterModule:
    def filters(self):
        return {"upgrade_failure": upgrade_failure, "ray_serve_failure": ray_serve_failure}
