# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ray Serve's REST API on a cluster's dashboard: the running config and each application's status, a config sent,
and the wait for it to run. Plain Python (standard library and the collection's HTTP reading), unit-tested with fake
openers; the ``ray_serve_apply`` module uses it. From Ray's own source, 2.59.0 and 2.60.0 wheels:

- ``PUT /api/serve/applications/`` on the dashboard (``ray/dashboard/modules/serve/serve_head.py``)
  takes a ``ServeDeploySchema`` (``ray/serve/schema.py``) and applies it declaratively: applications
  it does not list are deleted. ``GET`` answers ``ServeInstanceDetails``: ``proxy_location``,
  ``http_options`` and per application ``status``, ``message``, ``deployed_app_config`` (the exact
  application config submitted, only the options it set) and ``deployments`` (status, message,
  replicas). Both need the cluster's token (``Authorization: Bearer``) when ``RAY_AUTH_MODE=token``.
"""

from __future__ import annotations

import json
import time

from urllib.error import HTTPError, URLError
from urllib.request import Request

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.http_request import read_response

APPLICATIONS_PATH = "/api/serve/applications/"

APP_RUNNING = "RUNNING"

APP_FAILED = ("DEPLOY_FAILED",)


class ServeError(Exception):
    """The dashboard did not answer as expected. ``status``: the HTTP status (0: no answer)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def running_config(details):
    """What a desired config is compared with, from ``GET /api/serve/applications/``: None when Serve does not
    run; else {"proxy_location", "http_options": {host, port}, "applications": [deployed_app_config, ...]}."""
    if not isinstance(details, dict):
        raise ServeError("unexpected JSON from the Serve API: %r" % (details,))
    apps = details.get("applications") or {}
    if details.get("controller_info", {}).get("actor_id") in (None, "") and not apps:
        return None
    http = details.get("http_options") or {}
    return {
        "proxy_location": details.get("proxy_location"),
        "http_options": {"host": http.get("host"), "port": http.get("port")},
        "applications": [app.get("deployed_app_config") or {"name": name} for name, app in sorted(apps.items())],
    }


def parse_status(details):
    """{app: {"status", "message", "deployments": {name: {"name", "status", "message", "running", "target",
    "replicas": {state: count}}}}} from ``GET /api/serve/applications/``."""
    out = {}
    for name, app in sorted(((details or {}).get("applications") or {}).items()):
        deployments = {}
        for dname, dep in sorted((app.get("deployments") or {}).items()):
            states = {}
            for replica in dep.get("replicas") or []:
                states[replica.get("state")] = states.get(replica.get("state"), 0) + 1
            deployments[dname] = {
                "name": dname,
                "status": dep.get("status"),
                "message": dep.get("message") or "",
                "running": states.get("RUNNING", 0),
                "target": dep.get("target_num_replicas"),
                "replicas": states,
            }
        out[name] = {"status": app.get("status"), "message": app.get("message") or "", "deployments": deployments}
    return out


def not_running(status, apps):
    """Messages for the applications of ``apps`` that are not RUNNING (missing ones included), each naming the
    application, its status and why (its own message, else its deployments' that are not HEALTHY)."""
    out = []
    for name in apps:
        app = status.get(name)
        if app is None:
            out.append("application %s is not deployed" % name)
            continue
        if app["status"] == APP_RUNNING:
            continue
        reasons = [
            "%s %s%s" % (d["name"], d["status"], (": " + _short(d["message"])) if d["message"] else "")
            for d in app["deployments"].values()
            if d["status"] != "HEALTHY"
        ]
        why = _short(app["message"]) if app["message"] else "; ".join(reasons) or "no message"
        out.append("application %s is %s: %s" % (name, app["status"], why))
    return out


def _short(text, limit=600):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _request(url, token, method="GET", body=None, timeout=30.0, opener=None):
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer %s" % token
    request = Request(url, data=data, headers=headers, method=method)
    try:
        return read_response(request, timeout, opener)
    except HTTPError as exc:
        try:
            text = exc.read().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - the status is what matters
            text = ""
        hint = " (Ray token missing or wrong?)" if exc.code in (401, 403) else ""
        if exc.code == 501:
            hint = " (Ray Serve is not installed in the Ray venv: ray_pip_extras needs serve)"
        raise ServeError("%s %s: HTTP %s%s: %s" % (method, url, exc.code, hint, _short(text, 2000)), status=exc.code)
    except (URLError, OSError, ValueError) as exc:
        raise ServeError("%s %s: no answer: %s" % (method, url, getattr(exc, "reason", exc)), status=0)


def get_details(dashboard_url, token=None, timeout=30.0, opener=None):
    """``GET /api/serve/applications/`` as a dict."""
    url = dashboard_url.rstrip("/") + APPLICATIONS_PATH
    body = _request(url, token, timeout=timeout, opener=opener)
    try:
        return json.loads(body)
    except ValueError:
        raise ServeError("GET %s: the answer is not JSON: %s" % (url, _short(body, 200)))


def put_config(dashboard_url, config, token=None, timeout=60.0, opener=None):
    """``PUT /api/serve/applications/`` with ``config``."""
    _request(dashboard_url.rstrip("/") + APPLICATIONS_PATH, token, "PUT", config, timeout=timeout, opener=opener)


def wait_running(fetch, apps, timeout, interval=5.0, clock=time.monotonic, sleep=time.sleep):
    """Poll ``fetch()`` (-> parse_status) until every application of ``apps`` is RUNNING.

    A DEPLOY_FAILED application fails at once (Serve does not retry a failed build). Returns
    (ok, status, problems, seconds): ``problems`` names each application that is not RUNNING and why.
    """
    start = clock()
    status, problems = {}, ["no answer yet"]
    while True:
        try:
            status = fetch()
            problems = not_running(status, apps)
        except ServeError as exc:
            problems = [str(exc)]
        waited = clock() - start
        if not problems:
            return True, status, [], waited
        if any(status.get(a, {}).get("status") in APP_FAILED for a in apps):
            return False, status, problems, waited
        if waited >= timeout:
            return False, status, problems, waited
        sleep(max(0.0, min(interval, timeout - waited)))
