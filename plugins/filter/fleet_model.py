# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The fleet model (clusters, heads, members, node addresses) from the inventory and facts."""

from pathlib import Path

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as _fleet

_ROLES = Path(__file__).resolve().parents[2] / "roles"
_DEFAULTS = None


def _role_defaults():
    global _DEFAULTS
    if _DEFAULTS is None:
        loaded = {}
        for role in _fleet.SHARED_SETTINGS:
            path = _ROLES / role / "defaults" / "main.yml"
            loaded[role] = yaml.safe_load(path.read_text()) or {}
        _DEFAULTS = _fleet.literal_defaults(loaded)
    return _DEFAULTS


def fleet_model(hostvars, groups):
    try:
        defaults = _role_defaults()
        heads = list(groups.get("ray_head") or [])
        workers = list(groups.get("ray_workers") or [])
        monitoring = list(groups.get("monitoring") or [])
        routers = list(groups.get("router") or [])
        keys = set(defaults) | set(_fleet.INPUTS) | {"ray_dashboard_host"}
        hosts = {}
        for host in dict.fromkeys(heads + workers + monitoring + routers):
            hv = hostvars[host]
            hosts[host] = {
                "vars": {key: hv[key] for key in keys if key in hv},
                "facts": dict(hv.get("ansible_facts") or {}),
                "ansible_host": hv.get("ansible_host"),
            }
        model, problems = _fleet.build(heads, workers, hosts, defaults, monitoring, routers)
    except (ValueError, OSError) as exc:
        raise AnsibleFilterError("fleet_model: %s" % exc)
    model["problems"] = problems
    return model


def mixed_within_clusters(values, clusters, label=""):
    return _fleet.mixed_within_clusters(dict(values), dict(clusters), label)


class FilterModule:
    def filters(self):
        return {"fleet_model": fleet_model, "mixed_within_clusters": mixed_within_clusters}
