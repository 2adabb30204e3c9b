# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Each value a role's input checks receive, checked against the role's ``meta/argument_specs.yml`` (type, elements,
choices) with the validator Ansible runs when the role starts. Without this, a value of the wrong type that no
role check looks at (``grafana_http_port: four``) passed preflight and was refused only when its role started, after
the roles before it had changed the hosts.

Plain Python: the specs are read from the collection's files (``roles/<role>/meta/argument_specs.yml``), once per
process.
"""

import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import kind, shown

ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles"))
# What each spec field is checked for: the others (required, default, descriptions) are the role checks' business.
_CHECKED = ("type", "elements", "choices")
_PLURAL = {"int": "whole numbers", "float": "numbers", "bool": "booleans", "str": "strings", "path": "paths",
           "list": "lists", "dict": "mappings"}  # fmt: skip
_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "path": "a path (a string)",
    "list": "a list",
    "dict": "a mapping",
}
_SPECS = {}


def role_options(role):
    """{variable: its checked spec fields} of the role's main entry point ({} when the role has no spec)."""
    if role not in _SPECS:
        import yaml  # the controller's (Ansible's own dependency); imported here, not where modules run

        # libyaml's loader where there is one (as Ansible's): the pure-Python loader took ~14 ms a spec. Read once
        # per process: in the controller's main process before any worker (preload()), or where that did not run,
        # once per role in each validate task's worker process, i.e. once per host.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            with open(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")) as handle:
                options = yaml.load(handle, Loader=loader)["argument_specs"]["main"].get("options") or {}
        except (OSError, KeyError, TypeError):
            options = {}
        _SPECS[role] = {
            name: dict((k, v) for k, v in spec.items() if k in _CHECKED + ("no_log",)) for name, spec in options.items()
        }
    return _SPECS[role]


# Options of a role's main spec that are not inventory settings, so not its checks' inputs (role_inputs leaves them
# out): a result a caller passes in, a secret checked where it is used, the parameters of an entry point the
# playbooks call. {option: why}.
NOT_INPUTS = {
    "firewall_host_probe": "a host_probe result a caller may pass in, not a setting",
    "model_host_probe": "a host_probe result a caller may pass in, not a setting",
    "ray_host_probe": "a host_probe result a caller may pass in, not a setting",
    "model_hf_token": "a secret, read only on the node that downloads",
    "ray_serve_api_key": "a secret: its file (ray_serve_api_key_file) is checked",
    "router_hold_kind": "a parameter of the router's drain entry point, set by the playbooks",
    "router_hold_reason": "a parameter of the router's drain entry point, set by the playbooks",
    "router_undrain_only_if_out": "a parameter of the router's undrain entry point, set by the playbooks",
}

# What a role's checks receive for an input that is not set (or whose value names a variable that is not: a default
# such as model_revisions_dir's "{{ model_path }}.revisions" without model_path).
UNSET = "<unset>"


def input_names(role):
    """The options of the role's main spec that its checks receive: every one but NOT_INPUTS, in the spec's order."""
    return [name for name in role_options(role) if name not in NOT_INPUTS]


def preload():
    """Read every role's spec (plugins/vars/preload.py calls this in the controller's main process, so that the
    worker processes Ansible forks for each task inherit them)."""
    for role in sorted(os.listdir(ROLES_DIR)) if os.path.isdir(ROLES_DIR) else []:
        if os.path.isfile(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")):
            role_options(role)


def _expected(spec):
    words = _WORDS.get(spec.get("type", "str"), spec.get("type", "str"))
    if spec.get("type") == "list" and spec.get("elements"):
        words += " of %s" % _PLURAL.get(spec["elements"], spec["elements"])
    if spec.get("choices"):
        words += ", one of %s" % ", ".join(str(c) for c in spec["choices"])
    return words


def _usable(spec, value):
    """Whether the role can use the value as its spec says. Stricter than Ansible's validator where the role would
    misuse what Ansible converts without changing the variable: a string where a list or mapping is expected ('a,b'
    passes as a list, then a loop takes it letter by letter), a list, mapping or boolean where a string is
    expected (it would be written as Python's text of it), a boolean for a number."""
    declared = spec.get("type", "str")
    if value is None or value == UNSET:
        return True  # not set: the role's checks say when a value is required
    if declared == "list" and not isinstance(value, (list, tuple)):
        return False
    if declared == "dict" and not isinstance(value, dict):
        return False
    if declared in ("str", "path", "int", "float") and isinstance(value, bool):
        return False
    if declared in ("str", "path") and not isinstance(value, (str, int, float)):
        return False
    checked = dict((k, v) for k, v in spec.items() if k in _CHECKED)
    return not ArgumentSpecValidator({"value": checked}).validate({"value": value}).error_messages


def _names(message, name):
    """Whether the message names the variable as a whole word (ray_serve_api_key_file does not name
    ray_serve_api_key)."""
    return re.search(r"(?<![\w])%s(?![\w])" % re.escape(name), message) is not None


def problems(role, values, host, named=()):
    """A message for each value in ``values`` that the role's argument spec refuses, unless ``named`` (the role
    checks' messages) already names its variable. Secret values (``no_log``) are never shown: only their kind."""
    options = role_options(role)
    found = []
    for name in sorted(values):
        spec = options.get(name)
        if not spec or spec.get("type", "str") == "raw" or any(_names(message, name) for message in named):
            continue
        if _usable(spec, values[name]):
            continue
        value = kind(values[name]) if spec.get("no_log") else "%s (%s)" % (shown(values[name]), kind(values[name]))
        found.append(
            "%s on %s must be %s (roles/%s/meta/argument_specs.yml), got %s: correct it in the inventory, or remove "
            "it for the role's default." % (name, host, _expected(spec), role, value)
        )
    return found
