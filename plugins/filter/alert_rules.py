# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""A rule file's text with the ``for`` of some alerts set (prometheus_alert_for)."""

from ansible.errors import AnsibleFilterError


def alert_for(text, durations):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.alert_rules import with_for

    if not isinstance(durations, dict):
        raise AnsibleFilterError("alert_for: expected {alert: duration}, got %s" % type(durations).__name__)
    return with_for(text, durations) if durations else text


class FilterModule:
    def filters(self):
        return {"alert_for": alert_for}
