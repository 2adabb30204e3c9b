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

With tenants (module_utils/planners/door_tenants.py builds their maps) ``tenant_rules`` name each request's tenant by
its key's digest and enforce its models and limits; ``LOG_FORMAT`` writes the audit line of every request. The door's
Lua (the router role's ``rayvllm-door.lua``, at ``LUA_PATH``) counts every answer, its tokens and its time per tenant
and model, keeps each tenant's tokens of the last minute for ``tokens_per_minute``, and serves the counts to Prometheus
on the ``door_metrics`` frontend.

Plain Python: builds the configuration text; the router role writes it, ``haproxy -c`` checks it.
"""

import json

from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.routers import (
    door_model_problems,
    router_instance,
)

# Seconds a tenant over its rate is told to wait: the rate is counted over a sliding minute.
RETRY_AFTER_S = 60
# Where the router role puts the door's Lua (roles/router/files/rayvllm-door.lua).
LUA_PATH = "/etc/haproxy/rayvllm-door.lua"
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


def _quoted_error(status, kind, message):
    """An error body as one single-quoted HAProxy argument."""
    return _quoted(_error(status, kind, message))


def answer(status, condition, body, fmt="string", headers=""):
    """The lines of an answer of the door itself: the Lua action that counts it (LUA_PATH's door_answer; HAProxy 2.6
    runs no Lua after a return), then the return. BODY: one quoted argument (a log-format one with FMT lf-string)."""
    return [
        "  http-request lua.door_answer %d if %s" % (status, condition),
        "  http-request return status %d content-type application/json%s %s %s if %s"
        % (status, headers, fmt, body, condition),
    ]


def haproxy_config(
    routers, bind, map_path, max_body_bytes=1048576, timeout_s=600, maxconn=4096, user=None, tenancy=None,
    metrics_bind=None, lua_path=LUA_PATH,
):  # fmt: skip
    """(haproxy.cfg text, map file text) of a door listening on BIND ("host:port") in front of ROUTERS,
    {model: "host:port" of its router}. MAP_PATH: where the map file is written on the host. USER: the account
    HAProxy's worker runs as (its master, started by systemd as root, reads the files and binds the port).
    TENANCY: None (every client sends the clusters' key, passed through), or {"tenant_map", "keys_map" (the paths
    of door_tenants' two maps), "cluster_keys_pass"}. METRICS_BIND: where the door's Prometheus metrics (per tenant
    and model, from the Lua file at LUA_PATH) are served, None for nowhere."""
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
        # The accounting (requests, tokens, latency per tenant and model; tokens per minute): roles/router/files.
        "  lua-load %s" % lua_path,
        # One thread: HAProxy 2.6's Lua filters in the shared Lua state fail requests when several threads run them
        # ("attempt to index a number value", seen at 16 clients on 2 threads); one thread also keeps every count in
        # one place. benchmarks/front_door.sh measures what it costs against the router alone.
        "  nbthread 1",
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
        "  " + LOG_FORMAT,
        "  " + ERROR_LOG_FORMAT,
        "  filter lua.rayvllm_usage",
        "  http-request lua.door_begin",
        # The door's own liveness (the routers behind it have theirs, and vllm-router-health keeps their rotation).
        "  http-request return status 200 content-type text/plain string ok if { path /health }",
    ]
    # A body HAProxy could not hold whole: its model may be past what was read.
    lines += answer(413, "METH_POST { req.body_size gt %d }" % max_body_bytes, _quoted(too_large))
    lines += ["  http-request set-var(txn.model) req.body,json_query('$.model') if METH_POST"]
    tenanted = (
        tenant_rules(tenancy["tenant_map"], tenancy["keys_map"], tenancy.get("cluster_keys_pass", True))
        if tenancy
        else {"identify": [], "enforce": [], "table": []}
    )
    lines += tenanted["identify"]
    lines += [
        "  http-request return status 200 content-type application/json string %s if METH_GET { path /v1/models }"
        % _quoted(models_body(routers)),
        "  http-request set-var(txn.backend) var(txn.model),map(%s) if { var(txn.model) -m found }" % map_path,
    ]
    lines += answer(400, "METH_POST { path_beg /v1/ } !{ var(txn.model) -m found }", _quoted(no_model))
    lines += answer(404, "METH_POST { path_beg /v1/ } !{ var(txn.backend) -m found }", _quoted(unknown), "lf-string")
    lines += tenanted["enforce"]
    lines += [
        "  use_backend %[var(txn.backend)] if { var(txn.backend) -m found }",
        "  default_backend elsewhere",
        "",
        "backend elsewhere",
        "  http-request return status 404 content-type application/json string %s" % _quoted(elsewhere),
    ]
    for model, address in sorted(routers.items()):
        lines += ["", "backend %s" % backend_name(model), "  server router %s" % address]
    if metrics_bind:
        lines += [
            "",
            "frontend door_metrics",
            "  bind %s" % metrics_bind,
            "  no log",
            "  http-request use-service lua.door_metrics if { path /metrics }",
            "  http-request return status 404",
        ]
    if tenanted["table"]:
        lines += [""] + tenanted["table"]
    mapping = "".join("%s %s\n" % (model, backend_name(model)) for model in sorted(routers))
    return "\n".join(lines) + "\n", mapping


def door_files(routers, host, map_path, max_body_bytes=1048576, timeout_s=600, tenancy=None, lua_path=LUA_PATH):
    """{"config", "map"}: the door of router host HOST from the fleet model's routers (fleet_routers): it listens at
    routers.door.urls[HOST], serves its metrics at routers.door.metrics_urls[HOST] and sends each model to its
    router's URL on that host. TENANCY, LUA_PATH: as haproxy_config's."""
    bind = _host_port(routers["door"]["urls"][host])
    metrics = routers["door"].get("metrics_urls", {}).get(host)
    backends = {model: _host_port(m["urls"][host]) for model, m in routers["models"].items()}
    config, mapping = haproxy_config(
        backends, bind, map_path, max_body_bytes=max_body_bytes, timeout_s=timeout_s, user="haproxy", tenancy=tenancy,
        metrics_bind=_host_port(metrics) if metrics else None, lua_path=lua_path,
    )  # fmt: skip
    return {"config": config, "map": mapping}


def _host_port(url):
    """ "host:port" of an http URL (HAProxy's bind and server address; IPv6 in brackets as in the URL)."""
    rest = url.split("://", 1)[-1].rstrip("/")
    return rest.split("/", 1)[0]


def _over_limit(limit_var, rest):
    """The 429 body of a tenant over a limit: its name, the limit (from LIMIT_VAR) and REST (what, and when to retry),
    as one log-format argument."""
    message = "The tenant TENANT is over its limit of LIMIT " + rest
    return (
        _quoted_error(429, "RateLimitError", message)
        .replace("TENANT", "%[var(txn.tenant)]")
        .replace("LIMIT", "%%[var(%s)]" % limit_var)
    )


def tenant_rules(tenant_map_path, keys_map_path, cluster_keys_pass=True):
    """The HAProxy lines of the door's frontend that name the tenant and enforce its grants and limits, in order:
    ``identify`` (after the model is read, before /v1/models is answered) and ``enforce`` (after the model's router is
    found). CLUSTER_KEYS_PASS: a request whose key is no tenant's goes on as before the tenants (the clusters check
    it: their own key passes); False: it gets the door's 401."""
    tenant = "var(txn.tenant)"
    unauthorized = _quoted_error(
        401,
        "AuthenticationError",
        "The front door needs the key of a tenant (Authorization: Bearer <key>): none was sent, or it is no "
        "tenant key.",
    )
    forbidden = _quoted_error(
        403,
        "PermissionDeniedError",
        'The tenant TENANT may not use the model "MODEL": it may use NAMES.',
    )
    forbidden = (
        forbidden.replace("TENANT", "%[var(txn.tenant)]")
        .replace("MODEL", "%[var(txn.model),json(utf8s)]")
        .replace("NAMES", "%[var(txn.tenant),concat(.names),map(" + tenant_map_path + ")]")
    )
    over_rate = _over_limit("txn.rpm", "requests per minute: retry after %d s." % RETRY_AFTER_S)
    over_flight = _over_limit("txn.inflight", "requests in flight: retry when one has finished.")
    over_tokens = _over_limit("txn.tpm", "tokens per minute: retry after %[var(txn.tpm_retry)] s.")
    known = "{ %s -m found }" % tenant
    identify = [
        # The tenant: the SHA-256 of the key the request sends, looked up among the digests (no key on the host).
        "  http-request set-var(txn.tenant) req.hdr(authorization),word(2,' '),sha2(256),hex,lower,map(%s)"
        % tenant_map_path,
    ]
    if not cluster_keys_pass:
        identify += answer(401, "!" + known, unauthorized)
    identify.append(
        "  http-request return status 200 content-type application/json lf-string '%%[var(txn.tenant),concat(.models),"
        "map(%s)]' if METH_GET { path /v1/models } %s" % (tenant_map_path, known)
    )
    enforce = [
        "  http-request set-var(txn.grant) var(txn.tenant),concat(@,txn.model),map(%s) if %s"
        % (tenant_map_path, known),
    ]
    enforce += answer(403, "%s !{ var(txn.grant) -m found }" % known, forbidden, "lf-string")
    enforce += [
        # Requests per minute and in flight, counted per tenant (conn_cur: the tenant's requests not yet answered).
        "  http-request track-sc0 var(txn.tenant) table door_tenants if %s" % known,
        "  http-request set-var(txn.rpm) var(txn.tenant),concat(.rpm),map(%s,0) if %s" % (tenant_map_path, known),
        "  http-request set-var(txn.inflight) var(txn.tenant),concat(.inflight),map(%s,0) if %s"
        % (tenant_map_path, known),
        "  http-request set-var(txn.tpm) var(txn.tenant),concat(.tpm),map(%s,0) if %s" % (tenant_map_path, known),
        "  http-request set-var(txn.rate) sc_http_req_rate(0) if %s" % known,
        "  http-request set-var(txn.busy) sc_conn_cur(0) if %s" % known,
    ]
    enforce += answer(
        429,
        "%s { var(txn.rpm) -m int gt 0 } { var(txn.rpm),sub(txn.rate) -m int lt 0 }" % known,
        over_rate,
        "lf-string",
        " hdr Retry-After %d" % RETRY_AFTER_S,
    )
    enforce += answer(
        429,
        "%s { var(txn.inflight) -m int gt 0 } { var(txn.inflight),sub(txn.busy) -m int lt 0 }" % known,
        over_flight,
        "lf-string",
        " hdr Retry-After 1",
    )
    # Tokens per minute: the Lua keeps each tenant's tokens of the last minute (counted as answers end).
    enforce += ["  http-request lua.door_tokens_limit if %s { var(txn.tpm) -m int gt 0 }" % known]
    enforce += answer(
        429,
        "%s { var(txn.tpm_over) -m found }" % known,
        over_tokens,
        "lf-string",
        " hdr Retry-After %[var(txn.tpm_retry)]",
    )
    enforce += [
        # The backends see the clusters' key, never the tenant's.
        "  http-request set-header Authorization %%[var(txn.model),map(%s)] if %s" % (keys_map_path, known),
    ]
    table = [
        "backend door_tenants",
        "  stick-table type string len 48 size 10k expire 2m store http_req_rate(60s),conn_cur",
    ]
    return {"identify": identify, "enforce": enforce, "table": table}


# One line per request, the audit log: time, tenant ("-": a cluster key), model, status, milliseconds, bytes in and
# out, the answer's tokens (prompt and completion, from the usage vLLM reports; the door's Lua sets them; 0 where it
# did not); never the prompt or a key.
LOG_FORMAT = (
    'log-format \'{"time":"%tr","tenant":"%[var(txn.tenant)]","model":"%[var(txn.model),json(utf8s)]",'
    '"status":%ST,"ms":%Ta,"bytes_in":%U,"bytes_out":%B,'
    '"prompt_tokens":%[var(txn.prompt_tokens,0)],"completion_tokens":%[var(txn.completion_tokens,0)]}\''
)
# The same line for a request HAProxy refuses before any rule runs (a malformed request: no variable is read there,
# and the line above would write "-" where a number goes).
ERROR_LOG_FORMAT = (
    'error-log-format \'{"time":"%tr","tenant":"-","model":"-","status":%ST,"ms":%Ta,"bytes_in":%U,"bytes_out":%B,'
    '"prompt_tokens":0,"completion_tokens":0}\''
)
