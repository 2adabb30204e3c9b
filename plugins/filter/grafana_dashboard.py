# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Problems of a Grafana dashboard against the provisioned Prometheus datasource."""

from ansible.errors import AnsibleFilterError


def grafana_dashboard_problems(dashboard, datasource_uid, datasource_name=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.grafana_dashboard import dashboard_problems

    if not datasource_uid:
        raise AnsibleFilterError("grafana_dashboard_problems needs the provisioned datasource uid")
    if not isinstance(dashboard, (dict, str, bytes)):
        raise AnsibleFilterError("grafana_dashboard_problems expects dashboard JSON text or a mapping")
    return dashboard_problems(dashboard, str(datasource_uid), datasource_name)


class FilterModule:
    def filters(self):
        return {"grafana_dashboard_problems": grafana_dashboard_problems}
