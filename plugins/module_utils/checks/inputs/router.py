# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The router role's input checks (roles/router/tasks/validate.yml)."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import door_tenants
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    digits,
    integer,
    not_absolute,
    text,
    unsafe,
    wheelhouse_source,
)

POLICIES = (
    "cache_aware",
    "round_robin",
    "power_of_two",
    "random",
    "consistent_hash",
    "kv_aware",
    "sticky_least_loaded",
)
COUNTS = (
    "router_retries",
    "router_circuit_breaker_failures",
    "router_circuit_breaker_timeout",
    "router_liveness_interval",
    "router_request_timeout",
    "router_probe_interval",
    "router_probe_timeout",
    "router_probe_failures",
    "router_probe_successes",
    "router_drain_timeout",
    "router_hold_timeout",
)
AT_LEAST_ONE = ("router_retries", "router_probe_interval", "router_probe_timeout", "router_probe_failures",
                "router_probe_successes")  # fmt: skip
UNIT_VALUES = (
    "router_user",
    "router_install_root",
    "router_python_interpreter",
    "router_config_dir",
    "router_state_dir",
    "router_textfile_dir",
    "router_host",
    "router_systemd_hardening",
)


def _keyed(tenants):
    """The tenants, a stand-in for each key left out (the role generates it, usable by construction)."""
    if not isinstance(tenants, list):
        return tenants
    return [
        dict(t, key="generated-key-of-%s" % t.get("name")) if isinstance(t, dict) and t.get("key") is None else t
        for t in tenants
    ]


def _served(model):
    """The models the fleet's front door serves (the fleet model's routers)."""
    return ((model or {}).get("routers") or {}).get("door", {}).get("models") or []


def problems(values, host, model, context):
    v, found = values, []
    found.extend(
        not_absolute(
            v,
            ("router_install_root", "router_config_dir", "router_state_dir", "router_textfile_dir"),
            host,
            optional=("router_textfile_dir",),
        )
    )
    found.extend(wheelhouse_source(v, "router", host))
    if not (
        re.match(r"^[0-9][0-9A-Za-z.+-]*$", text(v.get("router_version")))
        and v.get("router_policy") in POLICIES
        and all(digits(v.get(key)) for key in COUNTS)
        and all(integer(v.get(key)) >= 1 for key in AT_LEAST_ONE)
        and integer(v.get("router_hold_timeout")) >= 600
        and v.get("router_log_level") in ("debug", "info", "error")
    ):
        found.append(
            "router on %s: router_version must be a version (got %s), router_policy one of %s (got %s), "
            "router_log_level debug, info or error (vllm-router 0.1.17 treats warning as info; got %s); "
            "router_retries, router_probe_interval, _timeout, _failures and _successes whole numbers of at least 1, "
            "router_circuit_breaker_failures, _timeout, router_liveness_interval, router_request_timeout and "
            "router_drain_timeout whole numbers, router_hold_timeout at least 600 s."
            % (host, text(v.get("router_version")), ", ".join(POLICIES), text(v.get("router_policy")),
               text(v.get("router_log_level")))
        )  # fmt: skip
    body = v.get("router_door_max_body_bytes")
    if not digits(body) or not 1024 <= integer(body) <= 64 * 1048576:
        found.append(
            "router on %s: router_door_max_body_bytes is %s: the front door reads each request's model from a body "
            "of at most this many bytes, so set a whole number from 1024 to 67108864 (64 MiB; the default 1048576)."
            % (host, text(body))
        )
    if not isinstance(v.get("router_door_cluster_keys"), bool):
        found.append(
            "router on %s: router_door_cluster_keys is %s: true (a key that is no tenant's goes on to the clusters) or "
            "false (the door refuses it)." % (host, text(v.get("router_door_cluster_keys")))
        )
    found.extend(
        "router on %s: %s" % (host, problem)
        for problem in door_tenants.problems(_keyed(v.get("router_tenants")), _served(model))
    )
    bad = unsafe(v, UNIT_VALUES)
    if bad:
        found.append(
            "router on %s: %s. A newline in a value written into vllm-router@.service or its health check's unit "
            "would start a directive of its own: remove it." % (host, ", ".join(bad))
        )
    return found
