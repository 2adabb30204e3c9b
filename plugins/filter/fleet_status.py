# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""How the fleet is compared with the inventory, and its tables (logic in module_utils/backends/fleet_status.py)."""

# Stands for module_utils' DEFAULT_FAIL_SEVERITIES, which this file imports on first use only.
_DEFAULT = object()


def fleet_status(probes, model, fail_severities=_DEFAULT):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.fleet_status import (
        DEFAULT_FAIL_SEVERITIES,
        evaluate,
    )

    if fail_severities is _DEFAULT:
        fail_severities = DEFAULT_FAIL_SEVERITIES
    return evaluate(model, probes, list(fail_severities or []))


def fleet_status_table(report):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.fleet_status import render

    return render(report)


def api_key(text):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.fleet_status import read_api_key

    return read_api_key(text or "")


class FilterModule:
    def filters(self):
        return {"fleet_status": fleet_status, "fleet_status_table": fleet_status_table, "api_key": api_key}
