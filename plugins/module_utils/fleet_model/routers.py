# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The routers of the fleet model: on every host of the ``router`` group, the front door (HAProxy at ``router_port``:
every served model at one URL, module_utils/planners/front_door.py) in front of one vllm-router per served model
(vllm-router 0.1.17 sends a request to any of its workers whatever its "model" field says), its backends the vLLM URL
of every cluster serving that model (every model of a Ray Serve cluster's ray_serve_models)."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import values as checks
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import join, url, variants
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import SHARED_SETTINGS, mode_row

INSTANCE_RE = re.compile(r"[^A-Za-z0-9_.-]+")
# A served model's name the front door can route: HAProxy's configuration and map syntax hold these unquoted.
DOOR_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$")
# Where the vLLM API keys of clusters behind a router live (beside the inventory): one per routed model.
ROUTED_KEY_PREFIX = "router/"


def router_instance(model):
    """The name of a served model's router instance (systemd vllm-router@<instance>, file names)."""
    return INSTANCE_RE.sub("-", str(model)).strip("-.") or "model"


def door_model_problems(models):
    """A message for each served model name the front door cannot route (an empty list when all can)."""
    return [
        "the served model name %r cannot be routed by the front door: use letters, digits and . _ - : / @ + (it "
        "must start with a letter or digit, at most 128 characters; vllm_served_model_name or ray_serve_models)." % m
        for m in sorted(models, key=str)
        if not isinstance(m, str) or not DOOR_MODEL_RE.match(m)
    ]


def _offset(base, i):
    return base + i if isinstance(base, int) and not isinstance(base, bool) else base


def _router_ports(settings, models):
    """{model: (port, metrics_port)}: router_model_ports where it names the model, else the next ports after the front
    door's: the i-th model (sorted) on router_port + 1 + i, its metrics on router_metrics_port + i."""
    table = settings.get("router_model_ports") or {}
    ports = {}
    for i, model in enumerate(models):
        ports[model] = (_offset(settings.get("router_port"), 1 + i), _offset(settings.get("router_metrics_port"), i))
    for model, entry in table.items():
        ports[model] = ((entry or {}).get("port"), (entry or {}).get("metrics_port"))
    return ports


def build_routers(fleet):
    """fleet.router_model: {"hosts", "addresses", "models": {model: {...}}, "door": {"port", "models", "urls",
    "metrics_port", "metrics_urls"}};
    and each cluster's router_model and vllm_api_key_name."""
    routers = fleet.routers
    result = fleet.router_model
    served = {}
    for name, cluster in sorted(fleet.clusters.items()):
        for model in cluster["served_models"]:
            served.setdefault(model, []).append(name)
    if routers:
        _build(fleet, served)
    for cluster in fleet.clusters.values():
        routed = result["models"].get(cluster["served_model_name"])
        cluster["router_model"] = cluster["served_model_name"] if routed else ""
        # The vLLM API key's name beside the inventory (credentials/<name>/vllm_api_key): the cluster's own, or
        # the routed model's, shared by every cluster behind the router (it passes the client's key through).
        cluster["vllm_api_key_name"] = ROUTED_KEY_PREFIX + routed["instance"] if routed else cluster["name"]


def _build(fleet, served):
    routers, problems, result = fleet.routers, fleet.problems, fleet.router_model
    keys = SHARED_SETTINGS["router"]
    for key in keys:
        values = {h: fleet.setting(h, key) for h in routers}
        if len(set(repr(v) for v in values.values())) > 1:
            problems.append(
                "the router hosts disagree on %s (%s): clients and the rollout treat them as one router. Set it once "
                "for the router group." % (key, variants(values))
            )
    settings = {k: fleet.setting(routers[0], k) for k in keys}
    result["addresses"] = {h: fleet.address(h) for h in routers}
    if not served:
        problems.append(
            "the router group has hosts (%s) but the inventory serves no model: a router needs at least one cluster "
            "(ray_head) behind it." % join(routers)
        )
        return
    table = settings.get("router_model_ports") or {}
    if not isinstance(table, dict) or not all(isinstance(e, dict) or e is None for e in table.values()):
        problems.append("router_model_ports must map served model names to {port, metrics_port}, got %r." % (table,))
        table = {}
        settings["router_model_ports"] = {}
    ports = _router_ports(settings, sorted(served))
    problems.extend(door_model_problems(served))
    door = settings.get("router_port")
    for model, entry in sorted(table.items()):
        if isinstance(entry, dict) and entry.get("port") == door and model in served:
            problems.append(
                "router_model_ports gives %s the port %s, which is router_port: the front door listens there and "
                "serves every model, %s included, at that one URL. Remove %s from router_model_ports (its router then "
                "listens on a port of its own after the door's) or give it another port." % (model, door, model, model)
            )
    for model in sorted(set(ports) - set(served)):
        problems.append(
            "router_model_ports names %s, which no cluster serves, so its router would have no backend (the clusters "
            "serve %s). Remove it or fix the name (vllm_served_model_name)." % (model, join(sorted(served)))
        )
    checked = {}
    for model, (port, metrics) in sorted(ports.items()):
        for kind, value in (("router port", port), ("metrics port", metrics)):
            if not checks.port([], kind, value, ""):
                problems.append("the %s of the %s router is %r: use a TCP port number." % (kind, model, value))
                value = None
            checked[(model, kind)] = int(value) if value is not None else 0
    instances = {}
    for model in served:
        instances.setdefault(router_instance(model), []).append(model)
    for instance, models in sorted(instances.items()):
        if len(models) > 1:
            problems.append(
                "served model names %s give one router instance name (%s): rename one (vllm_served_model_name)."
                % (join(sorted(models)), instance)
            )
    router_host = settings.get("router_host")
    door_port = checks.port([], "router_port", door, "")
    # The door's per-tenant metrics (the services table checks the port).
    door_metrics = checks.port([], "router_door_metrics_port", settings.get("router_door_metrics_port"), "")
    listen_host = router_host if isinstance(router_host, str) else None
    result["door"] = {
        "port": door_port or 0,
        "models": sorted(served),
        # How clients reach the door on each router host, and Prometheus its metrics.
        "urls": {h: url(listen_host, door_port, result["addresses"][h]) for h in routers},
        "metrics_port": door_metrics or 0,
        "metrics_urls": {h: url(listen_host, door_metrics, result["addresses"][h]) for h in routers},
    }
    for model, names in sorted(served.items()):
        if model not in ports:
            continue
        problems.extend(_key_problems(fleet, model, names))
        problems.extend(_agreement_problems(fleet, model, names))
        port, metrics = checked[(model, "router port")], checked[(model, "metrics port")]
        result["models"][model] = {
            "model": model,
            "instance": router_instance(model),
            "port": port,
            "metrics_port": metrics,
            "clusters": names,
            "backends": [{"cluster": c, "url": fleet.clusters[c]["vllm_url"]} for c in names],
            # How the door, the rollout and vllm-router-health reach it on each router host.
            "urls": {
                h: url(router_host if isinstance(router_host, str) else None, port or None, result["addresses"][h])
                for h in routers
            },
        }


# Settings every cluster behind one router must share: the router sends any request to any of them, so a prompt
# that fits one cluster's context and not another's would fail at random.
BEHIND_ONE_ROUTER = ("vllm_max_model_len",)
# vLLM flags (in vllm_extra_args) that shape what a client of the OpenAI API sees: the chat template and how it is
# read, tool calls, reasoning output, the tokenizer, log probabilities, the default sampling settings. Behind one
# router a request may go to any cluster, so a tool call or a chat answer would work, or look, different at random.
API_FLAGS = (
    "--chat-template",
    "--chat-template-content-format",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "--tool-parser-plugin",
    "--reasoning-parser",
    "--tokenizer",
    "--tokenizer-mode",
    "--max-logprobs",
    "--generation-config",
    "--override-generation-config",
    "--response-role",
    "--return-tokens-as-token-ids",
)


def _agreement_problems(fleet, model, names):
    """The clusters behind one router agree on BEHIND_ONE_ROUTER (each head's value; unset is vLLM's own, the
    model's full context) and on the API_FLAGS their heads pass to vLLM (vllm_serve clusters: a Ray Serve cluster
    takes its engine settings from its applications)."""
    problems = []
    for key in BEHIND_ONE_ROUTER:
        values = {c: fleet.settings.get(fleet.clusters[c].get("head"), {}).get(key) for c in names}
        if len(set(map(repr, values.values()))) < 2:
            continue
        problems.append(
            "the clusters behind the %s router serve with different %s (%s): the router sends a request to any of "
            "them, so a prompt that fits one and not another would fail at random. Set %s once for all of them."
            % (model, key, _on_clusters(values, _setting_label), key)
        )
    flags = {}
    for cluster in names:
        head = fleet.settings.get(fleet.clusters[cluster].get("head"), {})
        if mode_row(head)["server_args"]:
            flags[cluster] = checks.flag_values(head.get("vllm_extra_args"), API_FLAGS)
    for flag in API_FLAGS:
        values = {cluster: found.get(flag) for cluster, found in flags.items()}
        if len(set(map(repr, values.values()))) < 2:
            continue
        problems.append(
            "the clusters behind the %s router start vLLM with different %s in vllm_extra_args (%s): the router sends "
            "a request to any of them, so what a client gets back would differ at random. Give every cluster behind "
            "it the same %s (vllm_extra_args of their heads, e.g. in one group), or none of them."
            % (model, flag, _on_clusters(values, _flag_label), flag)
        )
    return problems


def _setting_label(value):
    return "unset (the model's full context)" if value is None else str(value)


def _flag_label(value):
    return "not set" if value is None else "given alone" if value is True else repr(value)


def _on_clusters(values, label):
    """ "<label> on <clusters>; ..." for {cluster: value}: the clusters grouped by their value's label, sorted."""
    by_label = {}
    for cluster, value in sorted(values.items()):
        by_label.setdefault(label(value), []).append(cluster)
    return "; ".join("%s on %s" % (text, join(clusters)) for text, clusters in sorted(by_label.items()))


def _key_problems(fleet, model, names):
    """The clusters behind one router serve with one vLLM API key: the router passes each client's key through
    unchanged to whichever cluster it picks (the router role also refuses different keys, but only once the clusters
    have been deployed). The model holds a digest of each head's vllm_api_key (None where the inventory leaves it to
    the default, the routed model's key file), never a value."""
    keys = {}
    for cluster in names:
        digest = fleet.settings.get(fleet.clusters[cluster].get("head"), {}).get("vllm_api_key")
        keys[cluster] = None if digest is None else str(digest)
    if len(set(keys.values())) < 2:
        return []
    numbers = {}
    for digest in sorted(k for k in keys.values() if k is not None):
        numbers.setdefault(digest, len(numbers) + 1)
    default = "the default key (credentials/%s%s/vllm_api_key beside the inventory)" % (
        ROUTED_KEY_PREFIX,
        router_instance(model),
    )

    def label(digest):
        return default if digest is None else "key %d set in the inventory" % numbers[digest]

    return [
        "the clusters behind the %s router serve with different vLLM API keys (%s; the values are never shown): the "
        "router passes each client's key through unchanged, so every cluster behind it must accept the same one. "
        "Set vllm_api_key once for all of them (the same value, e.g. in a group of their hosts), or on none of them."
        % (model, _on_clusters(keys, label))
    ]
