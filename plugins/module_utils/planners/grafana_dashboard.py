# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Check Grafana dashboard JSON against the provisioned datasource, and list its PromQL.

Plain Python, standard library only: used by the grafana role (filter
``rayvllm.fleet.grafana_dashboard_problems``) before dashboards are written, by
the sandbox verify tests, and unit-tested without Grafana.
"""

from __future__ import annotations

import json
import re

BUILTIN_DATASOURCES = ("-- Grafana --", "grafana", "-- Mixed --", "-- Dashboard --")
# Grafana's own interval variables, replaced by a fixed window when a query is run outside Grafana.
INTERVAL_VARIABLES = ("__rate_interval", "__interval", "__range")
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")


def load(text_or_dict):
    """A dashboard from its JSON text or an already decoded mapping."""
    if isinstance(text_or_dict, (bytes, str)):
        return json.loads(text_or_dict)
    return text_or_dict


def panels(dashboard):
    """Every panel, including those nested in collapsed rows, rows themselves excluded."""
    for panel in dashboard.get("panels") or []:
        if panel.get("type") == "row":
            yield from panel.get("panels") or []
        else:
            yield panel


def _variable_name(ref):
    """``"${datasource}"`` / ``"$datasource"`` / ``"[[datasource]]"`` -> ``"datasource"``; else None."""
    match = _VARIABLE.fullmatch(ref.strip()) if isinstance(ref, str) else None
    return next((g for g in match.groups() if g), None) if match else None


def _datasource_refs(dashboard):
    """(where, reference) for every datasource a dashboard names."""
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if "datasource" in variable:
            yield "variable %s" % variable.get("name"), variable["datasource"]
    for annotation in (dashboard.get("annotations") or {}).get("list") or []:
        if "datasource" in annotation:
            yield "annotation %s" % annotation.get("name"), annotation["datasource"]
    for panel in panels(dashboard):
        where = "panel %r" % panel.get("title", panel.get("id"))
        if "datasource" in panel:
            yield where, panel["datasource"]
        for target in panel.get("targets") or []:
            if "datasource" in target:
                yield "%s target %s" % (where, target.get("refId", "?")), target["datasource"]


def dashboard_problems(dashboard, datasource_uid, datasource_name=None):
    """What keeps a dashboard from resolving every query to the provisioned datasource.

    A reference resolves when it is Grafana's built-in source, null (the default
    datasource, which the role provisions), the provisioned uid (or name), or a
    datasource variable of type ``prometheus`` whose current value, if any, is the
    provisioned datasource. Returns one message per problem; empty when fine.
    """
    try:
        dashboard = load(dashboard)
    except ValueError as exc:
        return ["not valid JSON: %s" % exc]
    if not isinstance(dashboard, dict):
        return ["not a dashboard: a JSON object is expected"]
    problems = []
    title = dashboard.get("title")
    if not dashboard.get("uid") or not title:
        problems.append("dashboard %r has no uid or no title (provisioned dashboards need both)" % title)
    accepted = {datasource_uid} | ({datasource_name} if datasource_name else set())
    variables = {v.get("name"): v for v in (dashboard.get("templating") or {}).get("list") or []}

    def resolves(ref):
        if ref is None:
            return True
        if isinstance(ref, dict):
            uid = ref.get("uid")
            if uid is None:
                return ref.get("type") in ("prometheus",) + BUILTIN_DATASOURCES
            ref = uid
        if not isinstance(ref, str):
            return False
        if ref in BUILTIN_DATASOURCES or ref in accepted:
            return True
        name = _variable_name(ref)
        variable = variables.get(name)
        if not variable or variable.get("type") != "datasource" or variable.get("query") != "prometheus":
            return False
        current = (variable.get("current") or {}).get("value")
        return current in (None, "", "default") or current in accepted

    for where, ref in _datasource_refs(dashboard):
        if not resolves(ref):
            problems.append(
                "%s of dashboard %r uses datasource %s, which is not the provisioned Prometheus (uid %s)"
                % (where, title, json.dumps(ref, sort_keys=True), datasource_uid)
            )
    return problems


def variable_values(dashboard, interval="1m"):
    """Values to put in for a dashboard's variables when its queries run outside Grafana.

    "All"-capable variables get their allValue (``.*`` when unset); others their
    current value; Grafana's interval variables get ``interval``.
    """
    values = {name: interval for name in INTERVAL_VARIABLES}
    for variable in (load(dashboard).get("templating") or {}).get("list") or []:
        name = variable.get("name")
        current = (variable.get("current") or {}).get("value")
        if isinstance(current, list):
            current = current[0] if len(current) == 1 else None
        if variable.get("includeAll") and current in (None, "$__all"):
            values[name] = variable.get("allValue") or ".*"
        elif isinstance(current, str) and current:
            values[name] = current
        else:
            values[name] = ".*"
    return values


def expand(expr, values):
    """Replace ``$var``, ``${var}``, ``${var:format}`` and ``[[var]]`` by their values."""

    def put(match):
        name = next(g for g in match.groups() if g)
        return values.get(name, match.group(0))

    return _VARIABLE.sub(put, expr)


def panel_queries(dashboard, interval="1m"):
    """(panel title, refId, PromQL with variables expanded) for every query of every panel."""
    dashboard = load(dashboard)
    values = variable_values(dashboard, interval)
    queries = []
    for panel in panels(dashboard):
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if expr:
                queries.append((panel.get("title", ""), target.get("refId", ""), expand(expr, values)))
    return queries
