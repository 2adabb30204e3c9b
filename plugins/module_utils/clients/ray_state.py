# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Read the Ray dashboard's state API and decide whether a cluster is complete.

Plain Python: unit-tested without Ray, and shipped to managed hosts by Ansible's
module_utils mechanism. Requests go out with Ansible's open_url (module_utils/clients/http_request.py).
"""

from __future__ import annotations

import json
import time

from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import Request

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.http_request import read_response

ALIVE_NODES_QUERY = urlencode(
    {"filter_keys": "state", "filter_predicates": "=", "filter_values": "ALIVE", "limit": 10000, "detail": "true"}
)


class DashboardUnreachable(Exception):
    """The dashboard did not answer with usable JSON (connection refused, HTTP error, bad body)."""


def read_token_file(path):
    """The Ray token in ``path`` (the cluster's RAY_AUTH_TOKEN_PATH); ValueError naming the file when it is
    unreadable or empty (never the token)."""
    try:
        with open(path) as handle:
            token = handle.read().strip()
    except OSError as exc:
        raise ValueError("cannot read the Ray token file %s: %s" % (path, exc.strerror))
    if not token:
        raise ValueError("the Ray token file %s is empty" % path)
    return token


def nodes_url(dashboard_url):
    return dashboard_url.rstrip("/") + "/api/v0/nodes?" + ALIVE_NODES_QUERY


def state_rows(payload):
    """The rows of a state API answer (``data.result.result``; JSON text or parsed). Raises DashboardUnreachable
    naming what is wrong with it."""
    if isinstance(payload, (bytes, str)):
        try:
            payload = json.loads(payload)
        except ValueError as exc:
            raise DashboardUnreachable("the dashboard answered with something that is not JSON: %s" % exc)
    try:
        if payload.get("result") is False:
            raise DashboardUnreachable("the dashboard reported an error: %s" % payload.get("msg", "no message"))
        rows = payload["data"]["result"]["result"]
    except (AttributeError, KeyError, TypeError):
        raise DashboardUnreachable(
            "unexpected JSON from the dashboard (no data.result.result list); is this a Ray dashboard?"
        )
    return rows if isinstance(rows, list) else []


def parse_nodes(payload):
    """Turn the JSON of ``GET /api/v0/nodes`` into a list of node dicts.

    Only ALIVE nodes are kept (the query already filters, this guards against a
    server that ignores the filter). A node without a ``GPU`` key in
    ``resources_total`` has 0 GPUs.
    """
    rows = state_rows(payload)
    nodes = []
    for row in rows:
        if row.get("state", "ALIVE") != "ALIVE":
            continue
        resources = row.get("resources_total") or {}
        nodes.append(
            {
                "ip": row.get("node_ip"),
                "node_id": row.get("node_id"),
                "is_head": bool(row.get("is_head_node", False)),
                "gpus": float(resources.get("GPU", 0) or 0),
                "cpus": float(resources.get("CPU", 0) or 0),
            }
        )
    nodes.sort(key=lambda n: (not n["is_head"], n["ip"] or "", n["node_id"] or ""))
    return nodes


def summarize(nodes, min_nodes, min_gpus=0.0, expected_ips=()):
    """Compare the live nodes with what is required. Returns a result dict."""
    live_ips = set(n["ip"] for n in nodes)
    missing = [ip for ip in expected_ips if ip not in live_ips]
    total_gpus = float(sum(n["gpus"] for n in nodes))
    return {
        "alive_nodes": len(nodes),
        "total_gpus": total_gpus,
        "nodes": nodes,
        "missing_ips": missing,
        "ready": len(nodes) >= min_nodes and total_gpus >= float(min_gpus) and not missing,
    }


def shortfall_message(summary, min_nodes, min_gpus, waited, dashboard_url):
    return (
        "Ray cluster at %s not ready after %ss: %d/%d ALIVE nodes, %s/%s GPUs, missing IPs: %s. "
        "Check `journalctl -u ray-worker` on the missing hosts and that they reach the head's GCS port."
        % (
            dashboard_url,
            num_text(waited),
            summary["alive_nodes"],
            min_nodes,
            num_text(summary["total_gpus"]),
            num_text(min_gpus),
            ", ".join(summary["missing_ips"]) or "none",
        )
    )


def num_text(value):
    """1.0 -> "1", 1.5 -> "1.5": numbers in messages."""
    value = float(value)
    return str(int(value)) if value.is_integer() else str(value)


def fetch_nodes(dashboard_url, token=None, timeout=10.0, opener=None):
    """GET the ALIVE nodes. Raises DashboardUnreachable with the reason."""
    return parse_nodes(fetch_json(nodes_url(dashboard_url), token, timeout, opener))


def wait_for_cluster(
    fetch,
    min_nodes,
    min_gpus=0.0,
    expected_ips=(),
    timeout=300,
    interval=2.0,
    clock=time.monotonic,
    sleep=time.sleep,
):
    """Poll ``fetch()`` until the cluster is complete or ``timeout`` seconds pass.

    Returns ``(ok, summary, error)``: ``summary`` is the last successful reading
    (or None), ``error`` the last DashboardUnreachable message when the most
    recent attempt failed (None otherwise).
    """
    start = clock()
    summary = None
    error = None
    while True:
        try:
            summary = summarize(fetch(), min_nodes, min_gpus, expected_ips)
            error = None
        except DashboardUnreachable as exc:
            error = str(exc)
        if summary is not None and error is None and summary["ready"]:
            return True, summary, None
        elapsed = clock() - start
        if elapsed >= timeout:
            return False, summary, error
        sleep(max(0.0, min(interval, timeout - elapsed)))


# vLLM's ranks under its Ray executors are actors of these classes: RayWorkerWrapper (vllm/v1/executor/ray_utils.py,
# the RayDistributedExecutor) and RayWorkerProc (ray_executor_v2.py, RayExecutorV2: what vLLM 0.31 and 0.32 start on
# the sandbox's Ray).
VLLM_RANK_CLASSES = ("RayWorkerWrapper", "RayWorkerProc")


def actors_url(dashboard_url, node_id):
    """``GET /api/v0/actors`` of the ALIVE actors on one node."""
    query = urlencode(
        [
            ("filter_keys", "node_id"),
            ("filter_predicates", "="),
            ("filter_values", node_id),
            ("filter_keys", "state"),
            ("filter_predicates", "="),
            ("filter_values", "ALIVE"),
            ("limit", 10000),
            ("detail", "false"),
        ]
    )
    return dashboard_url.rstrip("/") + "/api/v0/actors?" + query


def parse_actors(payload):
    """{class name: count} of the ALIVE actors in the JSON of ``GET /api/v0/actors``."""
    rows = state_rows(payload)
    counts = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("state", "ALIVE") != "ALIVE":
            continue
        name = str(row.get("class_name") or "unknown")
        counts[name] = counts.get(name, 0) + 1
    return counts


def node_work(nodes, ips, fetch_actors):
    """For each address of ``ips``: {"alive": bool, "node_id", "actors": {class: count}, "vllm_ranks": int}, from
    the ALIVE ``nodes`` (parse_nodes) and ``fetch_actors(node_id)`` (parse_actors of that node). A node Ray does not
    list as ALIVE (stopped, or a dead server) runs nothing."""
    by_ip = {n["ip"]: n for n in nodes}
    result = {}
    for ip in ips:
        node = by_ip.get(ip)
        if node is None:
            result[ip] = {"alive": False, "node_id": "", "actors": {}, "vllm_ranks": 0}
            continue
        actors = fetch_actors(node["node_id"])
        result[ip] = {
            "alive": True,
            "node_id": node["node_id"],
            "actors": actors,
            "vllm_ranks": sum(actors.get(name, 0) for name in VLLM_RANK_CLASSES),
        }
    return result


def fetch_json(url, token=None, timeout=10.0, opener=None):
    """GET ``url`` of the dashboard with the token; the body. Raises DashboardUnreachable with the reason."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer %s" % token
    try:
        return read_response(Request(url, headers=headers), timeout, opener)
    except HTTPError as exc:
        hint = " (token missing or wrong?)" if exc.code in (401, 403) else ""
        raise DashboardUnreachable("HTTP %s from %s%s" % (exc.code, _site(url), hint))
    except (URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DashboardUnreachable("cannot reach %s: %s" % (_site(url), reason))


def _site(url):
    """http://host:port of a URL (what messages name)."""
    parts = urlsplit(url)
    return "%s://%s" % (parts.scheme, parts.netloc)
