# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Filters for values written into systemd units (see module_utils/systemd_unit.py)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.rayvllm.fleet.plugins.module_utils.systemd_unit import (
    directive_value,
    exec_arg,
    hardening,
    path_arg,
    private_tmp_conflicts,
    sandboxing,
    unsafe_values,
)


def systemd_exec_arg(value):
    try:
        return exec_arg(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_exec_arg: %s" % exc)


def systemd_path_arg(value):
    try:
        return path_arg(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_path_arg: %s" % exc)


def systemd_value(value):
    try:
        return directive_value(value)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_value: %s" % exc)


def systemd_sandboxing(hardening, writable=None):
    try:
        return "\n".join(sandboxing(hardening, writable or []))
    except ValueError as exc:
        raise AnsibleFilterError("systemd_sandboxing: %s" % exc)


def systemd_hardening(overrides=None):
    try:
        return hardening(overrides)
    except ValueError as exc:
        raise AnsibleFilterError("systemd_hardening: %s" % exc)


def unit_value_problems(variables):
    return unsafe_values(variables)


def private_tmp_problems(hardening, dirs):
    return private_tmp_conflicts(hardening, dirs)


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
