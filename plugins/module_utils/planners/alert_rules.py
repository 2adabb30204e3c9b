# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""How long an alert's condition must hold before it fires (a rule's ``for``), set per alert over a rule file's text
(prometheus_alert_for): the file keeps its comments and layout, only the named alerts' ``for`` lines change."""

import re

ALERT_RE = re.compile(r"^(\s*)-\s+alert:\s*['\"]?([A-Za-z_:][A-Za-z0-9_:]*)['\"]?\s*$")
RULE_RE = re.compile(r"^(\s*)-\s+(alert|record):")
FOR_RE = re.compile(r"^(\s*)for:\s*\S+\s*$")
# Prometheus' duration: units from the largest to the smallest, each at most once (1h30m, 90s, 2m).
DURATION_RE = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")


def is_duration(value):
    return isinstance(value, str) and value not in ("", "0") and DURATION_RE.match(value) is not None


def alert_names(text):
    """The alerts a rule file defines, in its order."""
    return [m.group(2) for m in map(ALERT_RE.match, text.splitlines()) if m]


def with_for(text, durations):
    """The rule file's text with each named alert's ``for`` set to its duration ({alert: duration}), on the line after
    its ``- alert:`` (the rule's own ``for`` line dropped). Alerts the file does not define: see alert_names."""
    out, current, indent = [], None, ""
    for line in text.splitlines(True):
        rule = RULE_RE.match(line)
        if rule:
            alert = ALERT_RE.match(line)
            current = alert.group(2) if alert and alert.group(2) in durations else None
            indent = rule.group(1) + "  "
            out.append(line if line.endswith("\n") else line + "\n")
            if current is not None:
                out.append("%sfor: %s\n" % (indent, durations[current]))
            continue
        found = FOR_RE.match(line)
        if current is not None and found and found.group(1) == indent:
            continue
        out.append(line)
    return "".join(out)
