# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Filters for values written into systemd units (see module_utils/planners/systemd_unit.py)."""

from ansible.errors import AnsibleFilterError


def _unit():
    # Imported on first use: Ansible loads every filter file of the collection to find any one filter, in every
    # worker process, so a file's imports cost every task that uses a rayvllm.fleet filter.
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import systemd_unit

    return systemd_unit


def systemd_exec_arg(value):
    try:
        return _unit().exec_arg(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_exec_arg: %s" % exc)


def systemd_path_arg(value):
    try:
        return _unit().path_arg(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_path_arg: %s" % exc)


def systemd_value(value):
    try:
        return _unit().directive_value(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_value: %s" % exc)


def systemd_sandboxing(hardening, writable=None):
    try:
        return "\n".join(_unit().sandboxing(hardening, writable or []))
    except ValueError as exc:
        raise AnsibleFilterError("systemd_sandboxing: %s" % exc)


def systemd_hardening(overrides=None):
    try:
        return _unit().hardening(overrides)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_hardening: %s" % exc)


def unit_value_problems(variables):
    return _unit().unsafe_values(variables)


def private_tmp_problems(hardening, dirs):
    return _unit().private_tmp_conflicts(hardening, dirs)


class FilterModule:
    def filters(self):
        return {
            "systemd_exec_arg": systemd_exec_arg,
            "systemd_path_arg": systemd_path_arg,
            "systemd_value": systemd_value,
            "systemd_sandboxing": systemd_sandboxing,
            "systemd_hardening": systemd_hardening,
            "unit_value_problems": unit_value_problems,
            "private_tmp_problems": private_tmp_problems,
        }
