# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The vllm_watchdog role's input checks (roles/vllm_watchdog/tasks/validate.yml)."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    digits,
    integer,
    not_absolute,
    text,
    unsafe,
)

COUNTS = (
    "vllm_watchdog_interval",
    "vllm_watchdog_timeout",
    "vllm_watchdog_failures",
    "vllm_watchdog_start_grace",
    "vllm_watchdog_backoff",
    "vllm_watchdog_backoff_max",
    "vllm_watchdog_hold_timeout",
)
UNIT_VALUES = (
    "vllm_watchdog_url",
    "vllm_watchdog_model",
    "vllm_watchdog_environment_file",
    "vllm_watchdog_unit",
    "vllm_watchdog_textfile_dir",
    "vllm_watchdog_python",
    "vllm_watchdog_systemd_hardening",
)


def problems(values, host, model, context):
    v, found = values, []
    found.extend(
        not_absolute(
            v,
            ("vllm_watchdog_environment_file", "vllm_watchdog_textfile_dir"),
            host,
            optional=("vllm_watchdog_textfile_dir",),
        )
    )
    n = {key: integer(v.get(key)) for key in COUNTS}
    if not (
        len(text(v.get("vllm_watchdog_model") or "")) > 0
        and re.match(r"^https?://", text(v.get("vllm_watchdog_url")))
        and all(digits(v.get(key)) for key in COUNTS)
        and n["vllm_watchdog_interval"] >= 1
        and n["vllm_watchdog_timeout"] >= 1
        and n["vllm_watchdog_failures"] >= 1
        and n["vllm_watchdog_backoff_max"] >= n["vllm_watchdog_backoff"]
        and n["vllm_watchdog_hold_timeout"] >= 60
    ):
        found.append(
            "vllm_watchdog on %s: vllm_watchdog_model must name the served model and vllm_watchdog_url be an http(s) "
            "URL; vllm_watchdog_interval, _timeout and _failures whole numbers of at least 1; _start_grace, _backoff, "
            "_backoff_max and _hold_timeout whole numbers of seconds, _backoff_max at least _backoff, _hold_timeout at "
            "least 60 (got interval=%s, timeout=%s, failures=%s, start_grace=%s, backoff=%s, backoff_max=%s, "
            "hold_timeout=%s)." % ((host,) + tuple(text(v.get(key)) for key in COUNTS))
        )
    bad = unsafe(v, UNIT_VALUES)
    if bad:
        found.append(
            "vllm_watchdog on %s: %s. A newline in a value written into vllm-watchdog.service would start a directive "
            "of its own (the watchdog runs as root): remove it." % (host, ", ".join(bad))
        )
    return found
