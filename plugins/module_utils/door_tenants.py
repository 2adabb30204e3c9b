# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Tenants at the front door (issue 56): each with a key of its own, the models it may use and its limits.

The door (HAProxy, module_utils/front_door.py) names a request's tenant by the SHA-256 of the key it sends: the hosts
hold digests only, never a tenant's key. A tenant over its requests per minute or its requests in flight gets a 429
with ``Retry-After``, a model it may not use a 403 naming the model, and the backends get the clusters' key in place
of the tenant's. Everything the door needs about tenants is one HAProxy map (``tenant_map``); the clusters' keys, one
per model, are a second one that only root reads (``keys_map``).

Plain Python: input checks, the map files and the HAProxy rules; the router role writes them.
"""

import hashlib
import json
import re

# A tenant's name: in the map's keys (after a digest, with "@" and "." as separators) and in log lines.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
MIN_KEY_LENGTH = 16
OPTIONS = ("name", "key", "models", "requests_per_minute", "max_in_flight")
LIMITS = ("requests_per_minute", "max_in_flight")
# Seconds a client over its rate is told to wait: the rate is counted over a sliding minute.
RETRY_AFTER_S = 60


def digest(key):
    """The SHA-256 of a key, as the door computes it (lowercase hex)."""
    return hashlib.sha256(str(key).encode("utf-8")).hexdigest()


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def problems(tenants, served, variable="router_tenants"):
    """Messages for unusable tenants (an empty list when all are usable). TENANTS: [{name, key, models?,
    requests_per_minute?, max_in_flight?}] with each key given (the role generates the missing ones first); SERVED:
    the models the fleet serves. A message never shows a key."""
    if not isinstance(tenants, list):
        return ["%s must be a list of tenants ({name, key, models, requests_per_minute, max_in_flight}), got %s."
                % (variable, type(tenants).__name__)]  # fmt: skip
    found, names, owners = [], set(), {}
    for i, tenant in enumerate(tenants):
        where = "%s[%d]" % (variable, i)
        if not isinstance(tenant, dict):
            found.append("%s must be a dict ({name, key, models, ...}), got %s." % (where, type(tenant).__name__))
            continue
        name = tenant.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            found.append(
                "%s: name %r is not a tenant name: use lowercase letters, digits, - and _ (at most 48, starting "
                "with a letter or digit)." % (where, name)
            )
            continue
        where = "tenant %s (%s)" % (name, where)
        if name in names:
            found.append("%s: the name is given twice: each tenant once." % where)
        names.add(name)
        unknown = sorted(set(tenant) - set(OPTIONS))
        if unknown:
            found.append(
                "%s: unknown option(s) %s: the options are %s." % (where, ", ".join(unknown), ", ".join(OPTIONS))
            )
        key = tenant.get("key")
        if not isinstance(key, str) or len(key) < MIN_KEY_LENGTH or key != key.strip() or " " in key:
            found.append(
                "%s: its key is not usable (the value is not shown): give a string of at least %d characters "
                "without spaces, or leave it out (the role then generates one into credentials/ beside the "
                "inventory)." % (where, MIN_KEY_LENGTH)
            )
        else:
            owners.setdefault(digest(key), []).append(name)
        models = tenant.get("models")
        if models is not None:
            if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
                found.append("%s: models must be a list of served model names, got %r." % (where, models))
            else:
                for model in sorted(set(models) - set(served)):
                    found.append(
                        "%s: the model %r is not served by the fleet (it serves %s): fix the name or remove it."
                        % (where, model, ", ".join(sorted(served)) or "none")
                    )
        for limit in LIMITS:
            if tenant.get(limit) is not None and not _count(tenant.get(limit)):
                found.append(
                    "%s: %s is %r: a whole number (0 or left out: no limit)." % (where, limit, tenant.get(limit))
                )
    for names_ in owners.values():
        if len(names_) > 1:
            found.append(
                "tenants %s have the same key (not shown): the door names a request's tenant by its key, so give "
                "each its own." % ", ".join(sorted(names_))
            )
    return found


def _models(tenant, served):
    models = tenant.get("models")
    return sorted(served) if models is None else sorted(set(models) & set(served))


def models_body(models):
    """GET /v1/models for a tenant: OpenAI's list shape, the models it may use."""
    data = [{"id": m, "object": "model", "owned_by": "rayvllm.fleet"} for m in sorted(models)]
    return json.dumps({"object": "list", "data": data}, separators=(",", ":"))


def tenant_map(tenants, served):
    """The text of the door's tenant map: "<digest> <name>" for each key, "<name>@<model> 1" for each model it may
    use, "<name>.rpm", "<name>.inflight" (0: no limit), "<name>.models" (its GET /v1/models answer) and
    "<name>.names" (its models, for the 403). TENANTS must have passed ``problems``."""
    lines = []
    for tenant in sorted(tenants, key=lambda t: t["name"]):
        name, models = tenant["name"], _models(tenant, served)
        lines.append("%s %s" % (digest(tenant["key"]), name))
        lines.extend("%s@%s 1" % (name, model) for model in models)
        lines.append("%s.rpm %d" % (name, tenant.get("requests_per_minute") or 0))
        lines.append("%s.inflight %d" % (name, tenant.get("max_in_flight") or 0))
        lines.append("%s.models %s" % (name, models_body(models)))
        lines.append("%s.names %s" % (name, ", ".join(models) or "none"))
    return "".join(line + "\n" for line in lines)


def keys_map(keys):
    """The text of the map of the clusters' keys the door sends in place of a tenant's: "<model> Bearer <key>"
    for each {model: key}. Secret: only root reads the file, and no task shows it."""
    for model, key in keys.items():
        if not isinstance(key, str) or not key or any(c.isspace() for c in key):
            raise ValueError("the vLLM API key of the %s router is empty or holds white space" % model)
    return "".join("%s Bearer %s\n" % (model, key) for model, key in sorted(keys.items()))


def _error(status, kind, message):
    """An OpenAI-style error body as one single-quoted HAProxy argument (no message holds a single quote)."""
    text = json.dumps({"error": {"message": message, "type": kind, "code": status}}, separators=(",", ":"))
    if "'" in text:
        raise ValueError("a single quote in %r" % text)
    return "'%s'" % text


def rules(tenant_map_path, keys_map_path, cluster_keys_pass=True):
    """The HAProxy lines of the door's frontend that name the tenant and enforce its grants and limits, in order:
    ``identify`` (after the model is read, before /v1/models is answered) and ``enforce`` (after the model's router is
    found). CLUSTER_KEYS_PASS: a request whose key is no tenant's goes on as before the tenants (the clusters check
    it: their own key passes); False: it gets the door's 401."""
    tenant = "var(txn.tenant)"
    unauthorized = _error(
        401,
        "AuthenticationError",
        "The front door needs the key of a tenant (Authorization: Bearer <key>): none was sent, or it is no "
        "tenant key.",
    )
    forbidden = _error(
        403,
        "PermissionDeniedError",
        'The tenant TENANT may not use the model "MODEL": it may use NAMES.',
    )
    forbidden = (
        forbidden.replace("TENANT", "%[var(txn.tenant)]")
        .replace("MODEL", "%[var(txn.model),json(utf8s)]")
        .replace("NAMES", "%[var(txn.tenant),concat(.names),map(" + tenant_map_path + ")]")
    )
    over_rate = (
        _error(
            429,
            "RateLimitError",
            "The tenant TENANT is over its limit of LIMIT requests per minute: retry after %d s." % RETRY_AFTER_S,
        )
        .replace("TENANT", "%[var(txn.tenant)]")
        .replace("LIMIT", "%[var(txn.rpm)]")
    )
    over_flight = (
        _error(
            429,
            "RateLimitError",
            "The tenant TENANT is over its limit of LIMIT requests in flight: retry when one has finished.",
        )
        .replace("TENANT", "%[var(txn.tenant)]")
        .replace("LIMIT", "%[var(txn.inflight)]")
    )
    known = "{ %s -m found }" % tenant
    identify = [
        # The tenant: the SHA-256 of the key the request sends, looked up among the digests (no key on the host).
        "  http-request set-var(txn.tenant) req.hdr(authorization),word(2,' '),sha2(256),hex,lower,map(%s)"
        % tenant_map_path,
    ]
    if not cluster_keys_pass:
        identify.append(
            "  http-request return status 401 content-type application/json string %s if !%s" % (unauthorized, known)
        )
    identify.append(
        "  http-request return status 200 content-type application/json lf-string '%%[var(txn.tenant),concat(.models),"
        "map(%s)]' if METH_GET { path /v1/models } %s" % (tenant_map_path, known)
    )
    enforce = [
        "  http-request set-var(txn.grant) var(txn.tenant),concat(@,txn.model),map(%s) if %s"
        % (tenant_map_path, known),
        "  http-request return status 403 content-type application/json lf-string %s"
        " if %s !{ var(txn.grant) -m found }" % (forbidden, known),
        # Requests per minute and in flight, counted per tenant (conn_cur: the tenant's requests not yet answered).
        "  http-request track-sc0 var(txn.tenant) table door_tenants if %s" % known,
        "  http-request set-var(txn.rpm) var(txn.tenant),concat(.rpm),map(%s,0) if %s" % (tenant_map_path, known),
        "  http-request set-var(txn.inflight) var(txn.tenant),concat(.inflight),map(%s,0) if %s"
        % (tenant_map_path, known),
        "  http-request set-var(txn.rate) sc_http_req_rate(0) if %s" % known,
        "  http-request set-var(txn.busy) sc_conn_cur(0) if %s" % known,
        "  http-request return status 429 content-type application/json hdr Retry-After %d lf-string %s if %s"
        " { var(txn.rpm) -m int gt 0 } { var(txn.rpm),sub(txn.rate) -m int lt 0 }" % (RETRY_AFTER_S, over_rate, known),
        "  http-request return status 429 content-type application/json hdr Retry-After 1 lf-string %s if %s"
        " { var(txn.inflight) -m int gt 0 } { var(txn.inflight),sub(txn.busy) -m int lt 0 }" % (over_flight, known),
        # The backends see the clusters' key, never the tenant's.
        "  http-request set-header Authorization %%[var(txn.model),map(%s)] if %s" % (keys_map_path, known),
    ]
    table = [
        "backend door_tenants",
        "  stick-table type string len 48 size 10k expire 2m store http_req_rate(60s),conn_cur",
    ]
    return {"identify": identify, "enforce": enforce, "table": table}


# One line per request, the audit log: time, tenant ("-": a cluster key), model, status, milliseconds, bytes in and
# out; never the prompt or a key.
LOG_FORMAT = (
    'log-format \'{"time":"%tr","tenant":"%[var(txn.tenant)]","model":"%[var(txn.model),json(utf8s)]",'
    '"status":%ST,"ms":%Ta,"bytes_in":%U,"bytes_out":%B}\''
)
