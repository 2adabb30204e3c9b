# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The alertmanager role's input checks (roles/alertmanager/tasks/validate.yml)."""

import json

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    is_sequence,
    not_absolute,
    text,
    unsafe,
)


def problems(values, host, model, context):
    v, found = values, []
    found.extend(not_absolute(v, ("alertmanager_config_file", "alertmanager_storage_path"), host))
    receivers, route = v.get("alertmanager_receivers"), v.get("alertmanager_route")
    names = (
        [text(r.get("name", "")) if isinstance(r, dict) else "" for r in receivers] if is_sequence(receivers) else []
    )
    receiver = route.get("receiver", names[0] if names else "") if isinstance(route, dict) else None
    if not (
        v.get("alertmanager_install_source") in ("package", "none")
        and is_sequence(receivers)
        and len(receivers) > 0
        and all(isinstance(r, dict) and "name" in r for r in receivers)
        and len(set(names)) == len(names)
        and isinstance(route, dict)
        and receiver in names
        and isinstance(v.get("alertmanager_global"), dict)
    ):
        found.append(
            "Alertmanager on %s: alertmanager_install_source must be package or none (got '%s'); "
            "alertmanager_receivers a non-empty list of receivers, each with a unique name (got names %s), for "
            "example [{name: ops, webhook_configs: [{url: 'http://hooks:9000/'}]}]; alertmanager_route a mapping "
            "whose receiver (default: the first receiver) is one of them (got %s)."
            % (host, text(v.get("alertmanager_install_source")), json.dumps(names),
               text(route.get("receiver", "none")) if isinstance(route, dict) else "none")
        )  # fmt: skip
    bad = unsafe(v, ("alertmanager_storage_path", "alertmanager_systemd_hardening"))
    if bad:
        found.append(
            "Alertmanager on %s: %s. A newline in a value written into prometheus-alertmanager.service's drop-in "
            "would start a directive of its own: remove it." % (host, ", ".join(bad))
        )
    return found
