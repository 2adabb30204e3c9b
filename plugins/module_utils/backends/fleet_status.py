# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""How the fleet is: read what runs (Ray's node list and version, vLLM's version and one completion, the
routers' rotations, Alertmanager's firing alerts), compare it with the fleet model (what the inventory asks
for) and render one table per cluster, or JSON.

Plain Python: unit-tested without a fleet. The reading half (``probe``) runs on managed hosts through the
module ``rayvllm.fleet.fleet_status_probe`` (requests go out with Ansible's open_url); the comparing and
rendering half (``evaluate``, ``render``) runs on the controller through the filters of
``plugins/filter/fleet_status.py``. Every failure to read is kept as a message in the probe's result, never
raised: the comparison then names what could not be read, and the playbook fails after showing the table.
"""

from __future__ import annotations

import json
import re
import time

from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import Request

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.http_request import read_response
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import (
    DashboardUnreachable,
    fetch_nodes,
    num_text,
    read_token_file,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.vllm_client import VllmError, base_url, complete

ALERTS_QUERY = urlencode({"active": "true", "silenced": "false", "inhibited": "false"})
DEFAULT_FAIL_SEVERITIES = ("critical",)


class ReadError(Exception):
    """An HTTP read gave no usable JSON (no answer, HTTP error, bad body)."""


# --- reading (on managed hosts) -----------------------------------------------------------------------


def get_json(url, headers=None, timeout=10.0, opener=None):
    """The JSON of ``GET url``. Raises ReadError with the reason (never a header's value)."""
    request = Request(url, headers=dict({"Accept": "application/json"}, **(headers or {})))
    try:
        body = read_response(request, timeout, opener)
    except HTTPError as exc:
        raise ReadError("HTTP %s from %s" % (exc.code, url.split("?")[0]))
    except (URLError, OSError, ValueError) as exc:
        raise ReadError("cannot reach %s: %s" % (url.split("?")[0], getattr(exc, "reason", exc)))
    try:
        return json.loads(body)
    except ValueError:
        raise ReadError("%s answered with something that is not JSON" % url.split("?")[0])


def parse_cluster_metadata(payload):
    """Ray's version from ``GET /api/v0/cluster_metadata`` (``data.rayVersion``); '' when absent."""
    try:
        return str(payload["data"].get("rayVersion") or "")
    except (AttributeError, KeyError, TypeError):
        return ""


# A line of a systemd environment file (NAME="value" as the env_file filter writes it, or NAME=value with an upper-case
# name): not a key, even alone in a file. A key may hold '=' (base64 padding).
_ENV_LINE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=[\"']|[A-Z_][A-Z0-9_]*=)")


def read_api_key(text):
    """The API key in a file: the value of ``VLLM_API_KEY=`` in a systemd environment file (vllm.env: quoted,
    escaped), else the content of a one-line key file (ray_serve's); '' when neither. The one parser of key files:
    the fleet_status_probe module and the router (the rayvllm.fleet.api_key filter) use it."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("VLLM_API_KEY="):
            value = line.split("=", 1)[1].strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            return value
    lines = text.strip().splitlines()
    return lines[0].strip() if len(lines) == 1 and not _ENV_LINE.match(lines[0].strip()) else ""


def parse_rotation(payload):
    """The backend URLs a vllm-router sends requests to (``GET /list_workers``: ``{"urls": [...]}``)."""
    try:
        return sorted(str(u).rstrip("/") for u in payload.get("urls") or [])
    except (AttributeError, TypeError):
        raise ReadError("unexpected JSON from the router's /list_workers (no urls list)")


def parse_alerts(payload):
    """Firing alerts from Alertmanager's ``GET /api/v2/alerts``: ``[{"name", "severity", "labels", "since",
    "summary"}]``, only the active ones (not silenced, not inhibited)."""
    if not isinstance(payload, list):
        raise ReadError("unexpected JSON from Alertmanager's /api/v2/alerts (not a list)")
    alerts = []
    for alert in payload:
        if not isinstance(alert, dict):
            continue
        state = (alert.get("status") or {}).get("state", "active")
        if state != "active":
            continue
        labels = dict(alert.get("labels") or {})
        alerts.append(
            {
                "name": str(labels.get("alertname", "")),
                "severity": str(labels.get("severity", "")),
                "labels": labels,
                "since": str(alert.get("startsAt", "")),
                "summary": str((alert.get("annotations") or {}).get("summary", "")),
            }
        )
    alerts.sort(key=lambda a: (a["name"], sorted(a["labels"].items())))
    return alerts


def probe_ray(dashboard_url, token_file, timeout=10.0, opener=None):
    """{"nodes": [...] (ray_state.parse_nodes), "version", "error"}: what a cluster's head says of its Ray."""
    result = {"url": dashboard_url, "nodes": None, "version": "", "error": ""}
    try:
        token = read_token_file(token_file) if token_file else None
    except ValueError as exc:
        result["error"] = str(exc)
        return result
    try:
        result["nodes"] = fetch_nodes(dashboard_url, token=token, timeout=timeout, opener=opener)
        headers = {"Authorization": "Bearer %s" % token} if token else {}
        meta = get_json(dashboard_url.rstrip("/") + "/api/v0/cluster_metadata", headers, timeout, opener)
        result["version"] = parse_cluster_metadata(meta)
    except (DashboardUnreachable, ReadError) as exc:
        result["error"] = str(exc)
    return result


def probe_vllm(url, api_key, model, prompt="The capital of France is", max_tokens=4, timeout=60.0, opener=None):
    """{"version", "version_error", "completion": {"tokens", "seconds"} or None, "error"}: one cluster's vLLM."""
    result = {"url": base_url(url), "model": model, "version": "", "version_error": "", "completion": None, "error": ""}
    try:
        result["version"] = str(
            get_json(base_url(url) + "/version", None, min(timeout, 10.0), opener).get("version", "")
        )
    except (ReadError, AttributeError) as exc:
        result["version_error"] = str(exc) if isinstance(exc, ReadError) else "no version in the answer"
    started = time.monotonic()
    try:
        answer = complete(url, api_key, model, prompt, max_tokens, timeout, opener)
        result["completion"] = {"tokens": answer["completion_tokens"], "seconds": answer["seconds"]}
    except VllmError as exc:
        result["error"] = "%s (after %ss)" % (exc, num_text(round(time.monotonic() - started, 1)))
    return result


def probe_router(url, timeout=10.0, opener=None):
    """{"url", "rotation": [backend URLs] or None, "error"}."""
    result = {"url": url.rstrip("/"), "rotation": None, "error": ""}
    try:
        result["rotation"] = parse_rotation(get_json(url.rstrip("/") + "/list_workers", None, timeout, opener))
    except ReadError as exc:
        result["error"] = str(exc)
    return result


def probe_alertmanager(url, timeout=10.0, opener=None):
    """{"url", "alerts": [...] or None, "error"}."""
    result = {"url": url.rstrip("/"), "alerts": None, "error": ""}
    try:
        result["alerts"] = parse_alerts(
            get_json(url.rstrip("/") + "/api/v2/alerts?" + ALERTS_QUERY, None, timeout, opener)
        )
    except ReadError as exc:
        result["error"] = str(exc)
    return result


# --- comparing (on the controller) --------------------------------------------------------------------


def _problem(host, what, expected, found):
    return {"host": host, "what": what, "expected": str(expected), "found": str(found)}


def problem_text(problem):
    return "%s: %s: expected %s, found %s" % (problem["host"], problem["what"], problem["expected"], problem["found"])


def _declared(value):
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def members_not_in_inventory(live, model, cluster):
    """The live Ray nodes (ray_state.parse_nodes) of ``cluster`` whose address no inventory host of that cluster
    has (its ``ray_node_ip``): a server retired from the inventory while its Ray still runs, or one left out by
    mistake. Sorted by address; none when ``live`` is None (Ray not read)."""
    hosts = ((model.get("clusters") or {}).get(cluster) or {}).get("hosts") or []
    nodes = model.get("nodes") or {}
    known = set(nodes[h]["ip"] for h in hosts if h in nodes)
    return sorted((n for n in live or [] if n.get("ip") not in known), key=lambda n: str(n.get("ip")))


def alerts_naming(alerts, cluster, hosts):
    """The alerts whose ``ray_cluster`` label is ``cluster`` or whose ``host`` label is one of ``hosts``."""
    return [
        a
        for a in alerts or []
        if a["labels"].get("ray_cluster") == cluster or (a["labels"].get("host") and a["labels"]["host"] in hosts)
    ]


def _serving(head, model, answer, url, probe, problems):
    """{"model", "tokens", "seconds", "error"} of one model's completion (``answer``: probe_vllm's, or an entry of its
    ``more``); a probed cluster without it is a problem, named at ``head``."""
    done = answer.get("completion")
    if probe and not done:
        problems.append(
            _problem(
                head, "completion of %s at %s" % (model, url), "one completion", answer.get("error") or "not asked"
            )
        )
    return {
        "model": model,
        "tokens": done["tokens"] if done else 0,
        "seconds": done["seconds"] if done else None,
        "error": answer.get("error", ""),
    }


def evaluate(model, probes, fail_severities=DEFAULT_FAIL_SEVERITIES):
    """Compare what runs with the fleet model.

    model: the fleet model (``fleet_facts_model``: clusters, nodes, routers). probes: {"clusters": {name: {"ray":
    probe_ray(), "vllm": probe_vllm()}}, "routers": {host: [probe_router()]}, "alertmanager": probe_alertmanager()
    or None}; a cluster missing from ``probes["clusters"]`` was not reached (its head failed or was left out).

    Returns {"ok", "problems": [{"host", "what", "expected", "found"}], "clusters": {name: {...}}}, every
    cluster's entry with its own ``problems``.
    """
    fail_severities = set(fail_severities or ())
    routers = model.get("routers") or {}
    alertmanager = probes.get("alertmanager")
    all_alerts = (alertmanager or {}).get("alerts")
    report = {"ok": True, "problems": [], "clusters": {}}
    for name, cluster in sorted((model.get("clusters") or {}).items()):
        nodes = model["nodes"]
        head = cluster["head"]
        settings = nodes[head]["settings"]
        probe = (probes.get("clusters") or {}).get(name) or {}
        ray = probe.get("ray") or {}
        vllm = probe.get("vllm") or {}
        problems = []
        entry = {
            "name": name,
            "head": head,
            "nodes": [],
            "alive": 0,
            "expected_nodes": len(cluster["hosts"]),
            "gpus": None,
            "expected_gpus": None,
            "ray": {"running": ray.get("version", ""), "asked": str(settings.get("ray_version") or "")},
            "vllm": {"running": vllm.get("version", ""), "asked": str(settings.get("vllm_version") or "")},
            "serving": {},
            "router": {},
            "alerts": [],
            "problems": problems,
        }
        # Nodes and GPUs.
        live = ray.get("nodes")
        if not probe:
            problems.append(_problem(head, "cluster %s's status" % name, "read from its head", "the head not reached"))
        elif live is None:
            problems.append(
                _problem(head, "Ray dashboard %s" % ray.get("url", ""), "answers", ray.get("error") or "no answer")
            )
        live_by_ip = {n["ip"]: n for n in live or []}
        expected_gpus = 0.0
        for host in cluster["hosts"]:
            node = nodes[host]
            found = live_by_ip.get(node["ip"]) if live is not None else None
            asked = _declared(node["settings"].get("ray_num_gpus"))
            expected_gpus = None if expected_gpus is None or asked is None else expected_gpus + asked
            row = {
                "host": host,
                "role": node["role"],
                "ip": node["ip"],
                "state": "?" if live is None else ("ALIVE" if found else "not alive"),
                "gpus": found["gpus"] if found else None,
                "expected_gpus": asked,
            }
            entry["nodes"].append(row)
            if live is None:
                continue
            if not found:
                problems.append(_problem(host, "Ray node %s in cluster %s" % (node["ip"], name), "ALIVE", "not alive"))
                continue
            entry["alive"] += 1
            if node["role"] == "head" and not found["is_head"]:
                problems.append(_problem(host, "Ray head of cluster %s" % name, "head node", "a worker node"))
            if asked is not None and found["gpus"] != asked:
                problems.append(_problem(host, "GPUs in Ray", num_text(asked), num_text(found["gpus"])))
        for extra in members_not_in_inventory(live, model, name):
            problems.append(
                _problem(
                    extra["ip"],
                    "ALIVE member of Ray cluster %s" % name,
                    "in the inventory (ray_head or ray_workers)",
                    "not in the inventory",
                )
            )
        if live is not None:
            entry["gpus"] = float(sum(n["gpus"] for n in live))
            entry["expected_gpus"] = expected_gpus
        # Versions.
        for part, label in (("ray", "Ray"), ("vllm", "vLLM")):
            running, asked = entry[part]["running"], entry[part]["asked"]
            if running and asked and running != asked:
                problems.append(_problem(head, "%s version of cluster %s" % (label, name), asked, running))
        if live is not None and not entry["ray"]["running"]:
            entry["ray"]["running"] = "?"
        # Serving: one completion of the cluster's model, and of each other model of a ray_serve cluster.
        model_name = cluster.get("served_model_name") or vllm.get("model") or ""
        url = vllm.get("url") or cluster.get("vllm_url", "")
        completion = vllm.get("completion")
        entry["serving"] = dict(_serving(head, model_name, vllm, url, probe, problems), url=url)
        more = vllm.get("more") or {}
        entry["more_serving"] = [
            _serving(head, other, more.get(other) or {}, url, probe, problems)
            for other in cluster.get("served_models") or []
            if other != model_name
        ]
        if probe and completion and not entry["vllm"]["running"]:
            entry["vllm"]["running"] = "?"
        # The router's rotation.
        routed = cluster.get("router_model") or ""
        if routed and routed in (routers.get("models") or {}):
            backend = next(b["url"] for b in routers["models"][routed]["backends"] if b["cluster"] == name).rstrip("/")
            for rhost in routers.get("hosts") or []:
                url = routers["models"][routed]["urls"].get(rhost, "")
                seen = next(
                    (r for r in (probes.get("routers") or {}).get(rhost) or [] if r["url"] == url.rstrip("/")), None
                )
                if seen is None or seen.get("rotation") is None:
                    state = "?"
                    problems.append(
                        _problem(
                            rhost,
                            "router %s at %s" % (routed, url),
                            "answers /list_workers",
                            (seen or {}).get("error") or "not reached",
                        )
                    )
                elif backend in seen["rotation"]:
                    state = "in"
                else:
                    state = "out"
                    problems.append(
                        _problem(
                            rhost, "cluster %s (%s) in the %s router's rotation" % (name, backend, routed), "in", "out"
                        )
                    )
                entry["router"][rhost] = state
        # Alerts.
        if all_alerts is not None:
            entry["alerts"] = alerts_naming(all_alerts, name, cluster["hosts"])
            for alert in entry["alerts"]:
                if alert["severity"] in fail_severities:
                    where = alert["labels"].get("host") or head
                    problems.append(
                        _problem(
                            where,
                            "alert %s (%s) of cluster %s" % (alert["name"], alert["severity"], name),
                            "not firing",
                            "firing since %s" % (alert["since"] or "?"),
                        )
                    )
        elif alertmanager is not None:
            entry["alerts"] = None
        report["clusters"][name] = entry
        report["problems"] += problems
    if alertmanager is not None and all_alerts is None:
        report["problems"].append(
            _problem(
                (model.get("monitoring") or {}).get("host") or "monitoring",
                "Alertmanager at %s" % alertmanager.get("url", ""),
                "answers /api/v2/alerts",
                alertmanager.get("error") or "no answer",
            )
        )
    report["ok"] = not report["problems"]
    report["problems_text"] = [problem_text(p) for p in report["problems"]]
    return report


# --- rendering -----------------------------------------------------------------------------------------


def _gpus(found, asked):
    if found is None and asked is None:
        return "?"
    return "%s/%s" % ("?" if found is None else num_text(found), "?" if asked is None else num_text(asked))


def _versions(part):
    running, asked = part["running"] or "?", part["asked"] or "?"
    return running if running == asked else "%s (asked for %s)" % (running, asked)


def _served(serving):
    if serving.get("seconds") is not None:
        return "%s: %d token(s) in %s s" % (serving["model"], serving["tokens"], serving["seconds"])
    return "%s: NO (%s)" % (serving["model"], serving.get("error") or "not asked")


def _table(rows):
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def render(report):
    """One table per cluster (a list of lines), then the problems."""
    lines = []
    for name, c in sorted(report["clusters"].items()):
        served = "; ".join(_served(s) for s in [c["serving"]] + c.get("more_serving", []))
        rotation = ", ".join("%s on %s" % (state, host) for host, state in sorted(c["router"].items())) or "no router"
        if c["alerts"] is None:
            alerts = "? (Alertmanager not read)"
        else:
            alerts = (
                ", ".join(
                    "%s (%s%s)"
                    % (a["name"], a["severity"] or "?", ", " + a["labels"]["host"] if a["labels"].get("host") else "")
                    for a in c["alerts"]
                )
                or "none"
            )
        lines.append("cluster %s: %s" % (name, "OK" if not c["problems"] else "NOT AS THE INVENTORY ASKS"))
        lines += [
            "  " + line
            for line in _table(
                [
                    ("nodes alive", "%d/%d" % (c["alive"], c["expected_nodes"])),
                    ("GPUs", _gpus(c["gpus"], c["expected_gpus"])),
                    ("Ray", _versions(c["ray"])),
                    ("vLLM", _versions(c["vllm"])),
                    ("serving", served),
                    ("router rotation", rotation),
                    ("firing alerts", alerts),
                ]
            )
        ]
        rows = [("host", "role", "address", "Ray", "GPUs")] + [
            (n["host"], n["role"], n["ip"], n["state"], _gpus(n["gpus"], n["expected_gpus"])) for n in c["nodes"]
        ]
        lines += ["  " + line for line in _table(rows)]
        lines += ["  ! " + problem_text(p) for p in c["problems"]]
    cluster_problems = sum(len(c["problems"]) for c in report["clusters"].values())
    lines += ["! " + problem_text(p) for p in report["problems"][cluster_problems:]]
    return lines
