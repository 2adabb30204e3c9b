# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Tenants at the front door (issue 56): each with a key of its own, the models it may use and its limits.

The door (HAProxy, module_utils/planners/front_door.py) names a request's tenant by the SHA-256 of the key it sends:
the hosts hold digests only, never a tenant's key. A tenant over its requests per minute, its tokens per minute (the
tokens of its answers of the last minute, counted by the door's Lua) or its requests in flight gets a 429
with ``Retry-After``, a model it may not use a 403 naming the model, and the backends get the clusters' key in place
of the tenant's. Everything the door needs about tenants is one HAProxy map (``tenant_map``); the clusters' keys, one
per model, are a second one that only root reads (``keys_map``). The HAProxy rules that read them are
front_door.tenant_rules.

Plain Python: input checks and the map files; the router role writes them.
"""

import hashlib
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.front_door import models_body

# A tenant's name: in the map's keys (after a digest, with "@" and "." as separators) and in log lines.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
MIN_KEY_LENGTH = 16
OPTIONS = ("name", "key", "models", "requests_per_minute", "tokens_per_minute", "max_in_flight")
LIMITS = ("requests_per_minute", "tokens_per_minute", "max_in_flight")


def digest(key):
    """The SHA-256 of a key, as the door computes it (lowercase hex)."""
    return hashlib.sha256(str(key).encode("utf-8")).hexdigest()


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def problems(tenants, served, variable="router_tenants"):
    """Messages for unusable tenants (an empty list when all are usable). TENANTS: [{name, key, models?,
    requests_per_minute?, tokens_per_minute?, max_in_flight?}] with each key given (the role generates the missing
    ones first); SERVED: the models the fleet serves. A message never shows a key."""
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


def tenant_map(tenants, served):
    """The text of the door's tenant map: "<digest> <name>" for each key, "<name>@<model> 1" for each model it may
    use, "<name>.rpm", "<name>.tpm", "<name>.inflight" (0: no limit), "<name>.models" (its GET /v1/models answer) and
    "<name>.names" (its models, for the 403). TENANTS must have passed ``problems``."""
    lines = []
    for tenant in sorted(tenants, key=lambda t: t["name"]):
        name, models = tenant["name"], _models(tenant, served)
        lines.append("%s %s" % (digest(tenant["key"]), name))
        lines.extend("%s@%s 1" % (name, model) for model in models)
        lines.append("%s.rpm %d" % (name, tenant.get("requests_per_minute") or 0))
        lines.append("%s.tpm %d" % (name, tenant.get("tokens_per_minute") or 0))
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
