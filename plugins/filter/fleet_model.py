# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The fleet model (clusters, heads, members, addresses, services and ports) from the inventory and facts."""

import hashlib
from pathlib import Path

import yaml
from ansible.errors import AnsibleFilterError


_ROLES = Path(__file__).resolve().parents[2] / "roles"
_DEFAULTS = None


def _fleet():
    # Imported on first use: Ansible loads every filter file of the collection to find any one filter, in every
    # worker process, so a file's imports cost every task that uses a rayvllm.fleet filter.
    from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model

    return fleet_model


def _spec():
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec

    return spec


def _role_defaults():
    global _DEFAULTS
    if _DEFAULTS is None:
        loaded = {}
        for role in _fleet().SHARED_SETTINGS:
            path = _ROLES / role / "defaults" / "main.yml"
            loaded[role] = yaml.safe_load(path.read_text()) or {}
        _DEFAULTS = _fleet().literal_defaults(loaded)
    return _DEFAULTS


def preload():
    """Read the shared defaults (plugins/vars/preload.py calls this in the controller's main process, so that the
    worker processes Ansible forks for each task inherit them)."""
    _role_defaults()


def shared_default(name):
    """The owning role's default of a setting the fleet model shares (SHARED_SETTINGS): what a host gets that the
    inventory leaves unset. For the first module call of a run, before the model exists."""
    try:
        return _role_defaults()[name]
    except KeyError:
        raise AnsibleFilterError("shared_default: %r is not a setting the fleet model shares" % (name,))


def fleet_model(hostvars, groups, leaving=None):
    fleet = _fleet()
    try:
        defaults = _role_defaults()
        heads = list(groups.get("ray_head") or [])
        workers = list(groups.get("ray_workers") or [])
        monitoring = list(groups.get("monitoring") or [])
        routers = list(groups.get("router") or [])
        keys = set(defaults) | set(fleet.INPUTS)
        # The fleet_facts role's own variables (meta/argument_specs.yml), checked here for every host at once rather
        # than by a validate_argument_spec task per host.
        spec = _spec()
        own = spec.role_options("fleet_facts")
        hosts, own_values = {}, {}
        for host in dict.fromkeys(heads + workers + monitoring + routers):
            hv = hostvars[host]
            hosts[host] = {
                "vars": {key: hv[key] for key in keys if key in hv},
                "facts": dict(hv.get("ansible_facts") or {}),
                "ansible_host": hv.get("ansible_host"),
            }
            # Secrets the model compares across clusters: a digest, never the value.
            hosts[host]["vars"].update((key, _digest(hv, key)) for key in fleet.DIGESTS if key in hv)
            own_values[host] = {key: hv[key] for key in own if key in hv}
    except (ValueError, OSError) as exc:
        raise AnsibleFilterError("fleet_model: %s" % exc)
    wrong = [message for host, values in own_values.items() for message in spec.problems("fleet_facts", values, host)]
    model, problems = fleet.build(heads, workers, hosts, defaults, monitoring, routers, leaving)
    model["problems"] = wrong + problems
    return model


def _digest(hostvars, key):
    """A digest of a host's secret, or a word saying why there is none (a value that does not render: undefined
    vault variable, failed lookup)."""
    try:
        value = hostvars[key]
    except Exception as exc:  # pylint: disable=broad-except  # whatever rendering the value raised
        return "unreadable (%s)" % type(exc).__name__
    return hashlib.sha256(str(value).encode("utf-8", "replace")).hexdigest()


def mixed_within_clusters(values, clusters, label=""):
    return _fleet().mixed_within_clusters(dict(values), dict(clusters), label)


class FilterModule:
    def filters(self):
        return {
            "fleet_model": fleet_model,
            "mixed_within_clusters": mixed_within_clusters,
            "shared_default": shared_default,
        }
