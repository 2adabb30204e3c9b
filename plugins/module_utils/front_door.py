# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The fleet's front door (issue 56): one URL for every model the fleet serves. HAProxy reads each request's
``model`` from its JSON body and sends it to that model's router (one vllm-router instance per model, as the router
role runs them: vllm-router 0.1.17 sends a request to any of its workers whatever its model). The door itself answers
``GET /v1/models`` with exactly the served models, and a request for a model the fleet does not serve with a 404 that
names the model and the served ones, instead of a backend's error.

HAProxy reads a body only as far as its buffer holds: a request whose ``model`` comes after a longer prompt (the
``openai`` client writes a chat request's ``messages`` before its ``model``) would not be routed, so the buffer is
sized to ``max_body_bytes`` and a larger request is refused with a 413 that says so.

Plain Python: builds the configuration text; the router role writes it, ``haproxy -c`` checks it.
"""

import json

from ansible_collections.rayvllm.fleet.plugins.module_utils import door_tenants
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.routers import (
    door_model_problems,
    router_instance,
)

# Room in HAProxy's buffer beyond the body: the request line and headers, and HAProxy's rewrite reserve.
HEADER_ROOM = 32768
MAX_REWRITE = 8192


def model_problems(models):
    """A message for each served model name the door cannot route (the fleet model's check)."""
    return door_model_problems(models)


def backend_name(model):
    """The HAProxy backend of a model's router: named as its router instance (the fleet model refuses two models with
    one instance name)."""
    return "router_" + router_instance(model)


def models_body(models):
    """The door's answer to GET /v1/models: OpenAI's list shape, the served models by name."""
    data = [{"id": m, "object": "model", "owned_by": "rayvllm.fleet"} for m in sorted(models)]
    return json.dumps({"object": "list", "data": data}, separators=(",", ":"))


def _error(status, kind, message):
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}, separators=(",", ":"))


def _quoted(text):
    """TEXT as one single-quoted HAProxy argument (the JSON bodies hold no single quote: names are MODEL_RE's)."""
    if "'" in text:
        raise ValueError("a single quote in %r" % text)
    return "'%s'" % text


def haproxy_config(
    routers, bind, map_path, max_body_bytes=1048576, timeout_s=600, maxconn=4096, user=None, tenancy=None
):  # fmt: skip
    """(haproxy.cfg text, map file text) of a door listening on BIND ("host:port") in front of ROUTERS,
    {model: "host:port" of its router}. MAP_PATH: where the map file is written on the host. USER: the account
    HAProxy's worker runs as (its master, started by systemd as root, reads the files and binds the port).
    TENANCY: None (every client sends the clusters' key, passed through), or {"tenant_map", "keys_map" (the paths
    of door_tenants' two maps), "cluster_keys_pass"}."""
    problems = model_problems(routers)
    if problems:
        raise ValueError(" ".join(problems))
    served = ", ".join(sorted(routers)) or "none"
    too_large = _error(
        413,
        "RequestTooLarge",
        "The request body is over the front door limit of %d bytes: the door reads the model from the body "
        "before it routes the request." % max_body_bytes,
    )
    no_model = _error(400, "BadRequestError", "The request names no model (its JSON body has no \"model\"): the "
                      "fleet serves %s." % served)  # fmt: skip
    # %[...] is HAProxy's sample in a log-format string: the requested name, escaped for JSON.
    unknown = _error(404, "NotFoundError", 'The model "MODEL" is not served here: the fleet serves %s.' % served)
    unknown = unknown.replace("MODEL", "%[var(txn.model),json(utf8s)]")
    elsewhere = _error(404, "NotFoundError", "Not found: the front door answers GET /v1/models and POST /v1/... "
                       "requests that name a model.")  # fmt: skip
    lines = [
        "# Written by rayvllm.fleet (router role): the fleet's front door, every served model at one URL.",
        "global",
        # One line per request on HAProxy's standard output (the journal under systemd).
        "  log stdout format raw local0 info",
    ]
    if user:
        lines += ["  user %s" % user, "  group %s" % user]
    lines += [
        "  maxconn %d" % maxconn,
        "  tune.bufsize %d" % (max_body_bytes + HEADER_ROOM),
        "  tune.maxrewrite %d" % MAX_REWRITE,
        "",
        "defaults",
        "  mode http",
        "  log global",
        "  timeout connect 5s",
        "  timeout client %ds" % timeout_s,
        "  timeout server %ds" % timeout_s,
        "  timeout http-request 60s",
        "",
        "frontend door",
        "  bind %s" % bind,
        "  option http-buffer-request",
        "  " + door_tenants.LOG_FORMAT,
        # The door's own liveness (the routers behind it have theirs, and vllm-router-health keeps their rotation).
        "  http-request return status 200 content-type text/plain string ok if { path /health }",
        # A body HAProxy could not hold whole: its model may be past what was read.
        "  http-request return status 413 content-type application/json string %s"
        " if METH_POST { req.body_size gt %d }" % (_quoted(too_large), max_body_bytes),
        "  http-request set-var(txn.model) req.body,json_query('$.model') if METH_POST",
    ]
    tenant_rules = (
        door_tenants.rules(tenancy["tenant_map"], tenancy["keys_map"], tenancy.get("cluster_keys_pass", True))
        if tenancy
        else {"identify": [], "enforce": [], "table": []}
    )
    lines += tenant_rules["identify"]
    lines += [
        "  http-request return status 200 content-type application/json string %s if METH_GET { path /v1/models }"
        % _quoted(models_body(routers)),
        "  http-request set-var(txn.backend) var(txn.model),map(%s) if { var(txn.model) -m found }" % map_path,
        "  http-request return status 400 content-type application/json string %s"
        " if METH_POST { path_beg /v1/ } !{ var(txn.model) -m found }" % _quoted(no_model),
        "  http-request return status 404 content-type application/json lf-string %s"
        " if METH_POST { path_beg /v1/ } !{ var(txn.backend) -m found }" % _quoted(unknown),
    ]
    lines += tenant_rules["enforce"]
    lines += [
        "  use_backend %[var(txn.backend)] if { var(txn.backend) -m found }",
        "  default_backend elsewhere",
        "",
        "backend elsewhere",
        "  http-request return status 404 content-type application/json string %s" % _quoted(elsewhere),
    ]
    for model, address in sorted(routers.items()):
        lines += ["", "backend %s" % backend_name(model), "  server router %s" % address]
    if tenant_rules["table"]:
        lines += [""] + tenant_rules["table"]
    mapping = "".join("%s %s\n" % (model, backend_name(model)) for model in sorted(routers))
    return "\n".join(lines) + "\n", mapping


def door_files(routers, host, map_path, max_body_bytes=1048576, timeout_s=600, tenancy=None):
    """{"config", "map"}: the door of router host HOST from the fleet model's routers (fleet_routers): it listens at
    routers.door.urls[HOST] and sends each model to its router's URL on that host. TENANCY: as haproxy_config's."""
    bind = _host_port(routers["door"]["urls"][host])
    backends = {model: _host_port(m["urls"][host]) for model, m in routers["models"].items()}
    config, mapping = haproxy_config(
        backends, bind, map_path, max_body_bytes=max_body_bytes, timeout_s=timeout_s, user="haproxy", tenancy=tenancy
    )
    return {"config": config, "map": mapping}


def _host_port(url):
    """ "host:port" of an http URL (HAProxy's bind and server address; IPv6 in brackets as in the URL)."""
    rest = url.split("://", 1)[-1].rstrip("/")
    return rest.split("/", 1)[0]
