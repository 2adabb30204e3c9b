# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The prometheus role's input checks (roles/prometheus/tasks/validate.yml)."""

import os
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.alert_rules import alert_names, is_duration
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import truthy
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    is_sequence,
    node,
    not_absolute,
    text,
    unsafe,
)

CONTROL_RE = re.compile(r"[\x00-\x1f]")


def _count(value):
    return len(value) if is_sequence(value) else 0


def problems(values, host, model, context):
    """context: ``removed`` ({removed variable: what replaced it} of those the inventory sets) and ``rule_files``
    (the project's rule files and prometheus_extra_rule_files, on the controller)."""
    v, found = values, []
    found.extend(not_absolute(v, ("prometheus_install_root", "prometheus_data_dir", "prometheus_config_dir"), host))
    discovery = truthy(v.get("prometheus_ray_service_discovery"))
    ray_hosts, vllm_hosts, node_hosts = (
        v.get("prometheus_ray_hosts"), v.get("prometheus_vllm_hosts"), v.get("prometheus_node_hosts")
    )  # fmt: skip
    if not ((_count(ray_hosts) > 0 or discovery) and _count(vllm_hosts) > 0 and _count(node_hosts) > 0):
        found.append(
            "Prometheus on %s would scrape an empty target list: Ray nodes (%d), vLLM servers (%d), node exporters "
            "(%d). Put the Ray nodes in ray_head/ray_workers, or set prometheus_ray_hosts / prometheus_vllm_hosts / "
            "prometheus_node_hosts to inventory hosts."
            % (host, _count(ray_hosts), _count(vllm_hosts), _count(node_hosts))
        )

    source = v.get("prometheus_install_source")
    if source != "package" and not (
        re.match(r"^\d+\.\d+\.\d+$", text(v.get("prometheus_version")))
        and re.match(r"^sha256:[0-9a-fA-F]{64}$", text(v.get("prometheus_archive_checksum")))
    ):
        found.append(
            "prometheus_install_source=archive on %s needs prometheus_version as an exact X.Y.Z (got '%s') and "
            "prometheus_archive_checksum as sha256:<64 hex digits> from the release's sha256sums.txt (got '%s')."
            % (host, text(v.get("prometheus_version")), text(v.get("prometheus_archive_checksum")))
        )

    clusters = model.get("clusters") or {}
    if discovery and not (node(model, host).get("role") == "head" and len(clusters) == 1):
        found.append(
            "prometheus_ray_service_discovery is true on %s, which is not the Ray head of the fleet's only cluster "
            "(clusters: %s): Ray writes its service-discovery file on each head, for that cluster only. Run "
            "Prometheus on the head of a one-cluster fleet, or set it false (the inventory's nodes are scraped then)."
            % (host, ", ".join(clusters))
        )

    removed = context.get("removed") or {}
    if removed:
        found.append(
            "".join("%s is no longer used: %s. " % (name, why) for name, why in sorted(removed.items()))
            + "Remove it from the inventory (set the component's own variable per cluster instead)."
        )

    extra = v.get("prometheus_extra_rule_files") if is_sequence(v.get("prometheus_extra_rule_files")) else []
    rule_files = [str(f) for f in context.get("rule_files") or []]
    missing = [str(f) for f in extra if not os.path.isfile(str(f))]
    names = [os.path.basename(f) for f in rule_files]
    if missing or len(set(names)) != len(names):
        found.append(
            "prometheus_extra_rule_files must name files on the controller whose names differ from each other and "
            "from the project's rules (%s); missing: %s." % (", ".join(names), ", ".join(missing) or "none")
        )

    found.extend(_alert_for_problems(v.get("prometheus_alert_for"), rule_files, host))

    bad = unsafe(v, ("prometheus_install_root", "prometheus_config_dir", "prometheus_data_dir",
                     "prometheus_systemd_hardening"))  # fmt: skip
    listen, retention = text(v.get("prometheus_web_listen_address")), text(v.get("prometheus_retention_time"))
    if bad or not re.match(r"^[A-Za-z0-9_.:\[\]-]+$", listen) or not re.match(r"^[0-9A-Za-z]+$", retention):
        found.append(
            "Prometheus on %s: %sprometheus_web_listen_address must be a host:port (got '%s') and "
            "prometheus_retention_time a duration such as 15d (got '%s'), without spaces, quotes or control "
            "characters." % (host, "".join(b + ". " for b in bad), CONTROL_RE.sub("?", listen),
                             CONTROL_RE.sub("?", retention))
        )  # fmt: skip
    return found


def _alert_for_problems(durations, rule_files, host):
    """prometheus_alert_for: {alert: duration}, each alert defined by a rule file that exists."""
    if durations in (None, {}):
        return []
    if not isinstance(durations, dict):
        kind = type(durations).__name__
        return ["prometheus_alert_for on %s must be a mapping {alert: duration} (got a %s)." % (host, kind)]
    known = []
    for path in rule_files:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                known.extend(alert_names(handle.read()))
    unknown = sorted(str(name) for name in durations if name not in known)
    bad = sorted("%s: %r" % (name, value) for name, value in durations.items() if not is_duration(value))
    found = []
    if unknown:
        found.append(
            "prometheus_alert_for on %s names alerts no rule file defines: %s. The alerts: %s."
            % (host, ", ".join(unknown), ", ".join(sorted(set(known))))
        )
    if bad:
        found.append(
            "prometheus_alert_for on %s: each value must be a Prometheus duration such as 30s, 5m or 1h30m (got %s)."
            % (host, ", ".join(bad))
        )
    return found
