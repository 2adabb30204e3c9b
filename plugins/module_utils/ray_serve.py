# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ray Serve LLM for a ``ray_serve`` cluster: its Serve config, what a change to it does, and its status.

Plain Python: unit-tested without Ray, and shipped to managed hosts by Ansible's module_utils
mechanism (the ``ray_serve_apply`` module). Read from Ray's own source, 2.59.0 and 2.60.0 wheels:

- ``PUT /api/serve/applications/`` on the dashboard (``ray/dashboard/modules/serve/serve_head.py``)
  takes a ``ServeDeploySchema`` (``ray/serve/schema.py``) and applies it declaratively: applications
  it does not list are deleted. ``GET`` answers ``ServeInstanceDetails``: ``proxy_location``,
  ``http_options`` and per application ``status``, ``message``, ``deployed_app_config`` (the exact
  application config submitted, only the options it set) and ``deployments`` (status, message,
  replicas). Both need the cluster's token (``Authorization: Bearer``) when ``RAY_AUTH_MODE=token``.
  ``http_options`` and ``proxy_location`` are read only when Serve starts: a PUT on a running Serve
  logs a warning and keeps the old ones.
- An application's code version is a hash of its ``import_path``, ``runtime_env``, ``args`` and a
  few deployment fields (``ray/serve/_private/deploy_utils.py``, ``get_app_code_version``). A config
  whose code version is unchanged is applied in place (``deployments`` overrides such as
  ``autoscaling_config`` or ``max_surge_percent``: no replica restarts); any other change rebuilds the
  application and every deployment in it gets the new version (``application_state.py``,
  ``build_serve_application``: ``version=code_version``), so all of its replicas are replaced,
  ``rolling_update_percentage`` (20 %, at least one) at a time. Ray 2.60's ``max_surge_percent``
  starts replacements before old replicas stop; with 0 (the default, and Ray 2.59) a deployment of
  one replica has none for a while.
- ``ray.serve.llm:build_openai_app`` deep-merges its defaults into each model's deployment options
  (``ray/llm/_internal/serve/core/server/builder.py``, ``DEFAULT_DEPLOYMENT_OPTIONS``;
  ``ray/llm/_internal/common/dict_utils.py``): ``autoscaling_config.target_ongoing_requests`` and
  ``max_ongoing_requests`` default to 1e9 (``constants.py``), so a model that does not set the target
  never scales. The config written here always sets it.
- The LLM deployment of a model is named ``LLMServer:<model id>`` with ``/`` as ``--`` and ``.`` as
  ``_`` (``builder.py``, ``_get_deployment_name``); the ingress deployment after its class.
"""

from __future__ import annotations

import copy
import json
import re
import time

from urllib.error import HTTPError, URLError
from urllib.request import Request

from ansible_collections.rayvllm.fleet.plugins.module_utils.http_request import read_response

APPLICATIONS_PATH = "/api/serve/applications/"
# What Ray's `[llm]` extra pins (Requires-Dist: vllm[audio]==X; extra == "llm" in the Ray wheel's
# METADATA). Ray's LLM module imports vLLM internals that move between releases: another vLLM is
# refused unless ray_serve_allow_vllm_version_mismatch is set. A Ray version missing here is read
# from the installed wheel (vllm_pin_from_metadata) on the hosts.
RAY_LLM_VLLM_PINS = {"2.59.0": "0.27.0", "2.60.0": "0.29.0"}
# Ray Serve learnt max_surge_percent in 2.60.0.
MAX_SURGE_SINCE = (2, 60, 0)
INGRESS_IMPORT = "rayvllm_serve_ingress:KeyedOpenAiIngress"
INGRESS_DEPLOYMENT = "KeyedOpenAiIngress"
# Each model's deployment class (LLMConfig.server_cls): Ray Serve LLM's LLMServer whose health check asks the engine
# itself, so Serve replaces a replica whose engine hangs (rayvllm_serve_ingress.py). Named LLMServer like Ray's: a
# model's deployment is named after its class (LLMServer:<model id>).
SERVER_IMPORT = "rayvllm_serve_ingress:LLMServer"
# Serve's health check of a model's replicas: every 10 s, and 30 s for an answer (Ray's LLM defaults: 10 and 10). The
# check's own call to the engine gives up after 15 s (ENGINE_PROBE_TIMEOUT_S there), so it answers first.
HEALTH_CHECK = {"health_check_period_s": 10, "health_check_timeout_s": 30}
BUILDER_IMPORT = "ray.serve.llm:build_openai_app"
PROXY_LOCATIONS = ("HeadOnly", "EveryNode")
# The parts of an application config that make up its code version: a change there rebuilds it.
CODE_KEYS = ("import_path", "runtime_env", "args")
APP_RUNNING = "RUNNING"
APP_FAILED = ("DEPLOY_FAILED",)
# The fields every entry of ray_serve_models has (with their types), and the optional ones.
MODEL_FIELDS = {
    "name": str,
    "model_path": str,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "min_replicas": int,
    "max_replicas": int,
    "target_ongoing_requests": (int, float),
    "engine_kwargs": dict,
}
MODEL_OPTIONAL = {
    "max_ongoing_requests": int,
    "autoscaling_config": dict,
    "accelerator_type": str,
    # The weights' sources, passed to the model role for this model.
    "model_source": str,
    "model_hf_repo": str,
    "model_hf_revision": str,
    "model_hf_allow_unpinned": bool,
    "model_controller_path": str,
    "model_size_gib": (int, float),
}
# Keys of engine_kwargs the role sets itself (from the model's own fields).
ENGINE_KWARGS_OWNED = ("tensor_parallel_size", "pipeline_parallel_size", "model", "served_model_name")
# autoscaling_config keys that are the model's own fields.
AUTOSCALING_OWNED = ("min_replicas", "max_replicas", "target_ongoing_requests")
_PIN_RE = re.compile(
    r"^Requires-Dist:\s*vllm(?:\[[^\]]*\])?\s*==\s*([0-9][^;\s]*)\s*;.*extra\s*==\s*[\"']llm[\"']", re.M
)


class ServeError(Exception):
    """The dashboard did not answer as expected. ``status``: the HTTP status (0: no answer)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def version_tuple(version):
    """'2.60.0' -> (2, 60, 0); parts that are not numbers end it."""
    out = []
    for part in str(version).split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        out.append(int(digits.group(0)))
    return tuple(out)


def supports_max_surge(ray_version):
    return version_tuple(ray_version) >= MAX_SURGE_SINCE


def vllm_pin_from_metadata(text):
    """The vLLM version a Ray wheel's METADATA pins for its ``llm`` extra, or None."""
    match = _PIN_RE.search(text or "")
    return match.group(1) if match else None


def deployment_name(model_id):
    """Ray Serve LLM's name of a model's LLM deployment (builder.py, _get_deployment_name)."""
    return "LLMServer:" + model_id.replace("/", "--").replace(".", "_")


def replica_gpus(model):
    """GPUs one replica of a model takes: one engine, TP x PP ranks, one GPU each."""
    return int(model["tensor_parallel_size"]) * int(model["pipeline_parallel_size"])


def _is(value, kinds):
    if kinds is int or kinds == (int, float):
        if isinstance(value, bool):
            return False
    return isinstance(value, kinds)


def model_problems(models, cluster, declared_gpus=None, ray_version=None, vllm_version=None, allow_mismatch=False):
    """What makes ``ray_serve_models`` unusable for cluster ``cluster``: a list of messages, each with the fix.

    ``declared_gpus``: the GPUs the cluster's nodes declare (None: not known before Ray starts).
    """
    where = "cluster '%s'" % cluster
    if not isinstance(models, list) or not models:
        return [
            "%s serves with vllm_serving_mode: ray_serve but ray_serve_models is %s: list its models, each with "
            "name, model_path, tensor_parallel_size, pipeline_parallel_size, min_replicas, max_replicas, "
            "target_ongoing_requests and engine_kwargs."
            % (where, "empty" if models in (None, [], "") else "not a list")
        ]
    problems = []
    names = []
    need = 0
    for index, model in enumerate(models):
        label = "ray_serve_models[%d]" % index
        if not isinstance(model, dict):
            problems.append("%s: %s is not a mapping (got %r)." % (where, label, model))
            continue
        if isinstance(model.get("name"), str) and model["name"]:
            label = "ray_serve_models[%d] (%s)" % (index, model["name"])
        missing = [k for k in MODEL_FIELDS if k not in model]
        if missing:
            problems.append("%s: %s lacks %s." % (where, label, ", ".join(missing)))
        unknown = sorted(set(model) - set(MODEL_FIELDS) - set(MODEL_OPTIONAL))
        if unknown:
            problems.append(
                "%s: %s has unknown fields %s (known: %s)."
                % (where, label, ", ".join(unknown), ", ".join(list(MODEL_FIELDS) + list(MODEL_OPTIONAL)))
            )
        wrong = [
            "%s (%s, got %r)" % (k, _type_name(t), model[k])
            for k, t in list(MODEL_FIELDS.items()) + list(MODEL_OPTIONAL.items())
            if k in model and not _is(model[k], t)
        ]
        if wrong:
            problems.append("%s: %s has fields of the wrong type: %s." % (where, label, "; ".join(wrong)))
            continue
        if missing:
            continue
        names.append(model["name"])
        if not model["name"].strip() or any(c.isspace() or not c.isprintable() for c in model["name"]):
            problems.append("%s: %s: name must be a non-empty model id without spaces." % (where, label))
        if not model["model_path"].startswith("/"):
            problems.append("%s: %s: model_path must be absolute (got %r)." % (where, label, model["model_path"]))
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "min_replicas", "max_replicas"):
            if model[key] < 1:
                problems.append("%s: %s: %s must be at least 1 (got %r)." % (where, label, key, model[key]))
        if model["min_replicas"] > model["max_replicas"]:
            problems.append(
                "%s: %s: min_replicas %d is above max_replicas %d."
                % (where, label, model["min_replicas"], model["max_replicas"])
            )
        if model["target_ongoing_requests"] <= 0:
            problems.append(
                "%s: %s: target_ongoing_requests must be above 0 (got %r): Serve adds a replica when the "
                "requests in flight per replica exceed it." % (where, label, model["target_ongoing_requests"])
            )
        owned = [k for k in ENGINE_KWARGS_OWNED if k in model["engine_kwargs"]]
        if owned:
            problems.append(
                "%s: %s: engine_kwargs sets %s, which the role sets from the model's own fields (name, model_path, "
                "tensor_parallel_size, pipeline_parallel_size): remove it." % (where, label, ", ".join(owned))
            )
        if "api_key" in model["engine_kwargs"]:
            problems.append(
                "%s: %s: engine_kwargs sets api_key: it would be shown in the Serve config; the ingress checks "
                "vllm_api_key." % (where, label)
            )
        extra = model.get("autoscaling_config") or {}
        clash = [k for k in AUTOSCALING_OWNED if k in extra]
        if clash:
            problems.append(
                "%s: %s: autoscaling_config sets %s: use the model's own fields." % (where, label, ", ".join(clash))
            )
        need += model["max_replicas"] * replica_gpus(model)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(
            "%s: ray_serve_models names %s more than once: model ids must be unique." % (where, ", ".join(duplicates))
        )
    if declared_gpus is not None and not problems and need > declared_gpus:
        detail = ", ".join("%s %d x %d" % (m["name"], m["max_replicas"], replica_gpus(m)) for m in models)
        problems.append(
            "%s: the models' replicas need %d GPUs at max_replicas (max_replicas x tensor_parallel_size x "
            "pipeline_parallel_size: %s) but the cluster's nodes declare %d (ray_num_gpus). Lower max_replicas or "
            "add GPUs." % (where, need, detail, declared_gpus)
        )
    if ray_version and vllm_version:
        pinned = RAY_LLM_VLLM_PINS.get(str(ray_version))
        if pinned and pinned != str(vllm_version) and not allow_mismatch:
            problems.append(
                "%s: Ray %s's Serve LLM is built for vLLM %s (its [llm] extra pins vllm==%s) but vllm_version is %s: "
                'Ray\'s LLM module imports vLLM internals that move between releases. Set vllm_version: "%s", or '
                "ray_serve_allow_vllm_version_mismatch: true to accept the risk."
                % (where, ray_version, pinned, pinned, vllm_version, pinned)
            )
    return problems


def surge_plan(models, declared_gpus, ray_version, max_surge_percent):
    """Whether rolling replacements surge: Ray >= 2.60, a percent above 0, and (when the nodes declare their GPUs)
    room for one more replica of every model at max_replicas (an application's rebuild replaces all of them at
    once). Returns {"surge", "gpus_at_max", "gpus_with_surge", "declared_gpus", "why"}."""
    at_max = sum(int(m["max_replicas"]) * replica_gpus(m) for m in models)
    with_surge = at_max + sum(replica_gpus(m) for m in models)
    plan = {"surge": False, "gpus_at_max": at_max, "gpus_with_surge": with_surge, "declared_gpus": declared_gpus}
    if not max_surge_percent:
        return dict(plan, why="max_surge_percent is 0")
    if not supports_max_surge(ray_version):
        return dict(plan, why="Ray %s has no max_surge_percent (2.60.0 or later)" % ray_version)
    if declared_gpus is not None and declared_gpus < with_surge:
        return dict(plan, why="%d GPUs declared, %d needed to surge at max_replicas" % (declared_gpus, with_surge))
    return dict(plan, surge=True, why="")


def _type_name(kinds):
    if isinstance(kinds, tuple):
        return " or ".join(k.__name__ for k in kinds)
    return kinds.__name__


def build_config(models, settings):
    """The ServeDeploySchema (PUT /api/serve/applications/) for ``models`` (ray_serve_models, checked).

    ``settings``: app_name, python (the vLLM venv's interpreter), ingress_dir (where
    rayvllm_serve_ingress.py is on every node), api_key_file, http_host, http_port, proxy_location,
    env_vars (the replicas' environment: not secret, the Serve config shows it), ingress_replicas,
    max_surge_percent (0: none; only for Ray >= 2.60), model_sources ({name: path}: the staged
    revision of each model's weights; default its model_path), code_version (a digest of
    rayvllm_serve_ingress.py: a new one rebuilds the application, so every replica runs the shipped code).
    """
    sources = settings.get("model_sources") or {}
    env = dict(settings.get("env_vars") or {})
    env["PYTHONPATH"] = settings["ingress_dir"]
    if settings.get("code_version"):
        env["RAYVLLM_SERVE_CODE"] = settings["code_version"]
    llm_configs = []
    deployments = []
    surge = int(settings.get("max_surge_percent") or 0)
    for model in models:
        engine = dict(model["engine_kwargs"])
        engine["tensor_parallel_size"] = int(model["tensor_parallel_size"])
        engine["pipeline_parallel_size"] = int(model["pipeline_parallel_size"])
        llm = {
            "model_loading_config": {
                "model_id": model["name"],
                "model_source": sources.get(model["name"]) or model["model_path"],
            },
            "engine_kwargs": engine,
            "server_cls": SERVER_IMPORT,
            "deployment_config": dict(HEALTH_CHECK),
        }
        if model.get("accelerator_type"):
            llm["accelerator_type"] = model["accelerator_type"]
        if model.get("max_ongoing_requests"):
            llm["deployment_config"]["max_ongoing_requests"] = int(model["max_ongoing_requests"])
        llm_configs.append(llm)
        # Replicas and autoscaling as deployment overrides: applied in place, no rebuild, no restart.
        autoscaling = dict(model.get("autoscaling_config") or {})
        autoscaling.update(
            min_replicas=int(model["min_replicas"]),
            max_replicas=int(model["max_replicas"]),
            target_ongoing_requests=model["target_ongoing_requests"],
        )
        deployment = {"name": deployment_name(model["name"]), "autoscaling_config": autoscaling}
        if surge:
            deployment["max_surge_percent"] = surge
        deployments.append(deployment)
    ingress = int(settings.get("ingress_replicas") or 1)
    ingress_deployment = {
        "name": INGRESS_DEPLOYMENT,
        "autoscaling_config": {"min_replicas": ingress, "max_replicas": ingress, "target_ongoing_requests": 1000000},
    }
    if surge:
        ingress_deployment["max_surge_percent"] = surge
    deployments.append(ingress_deployment)
    app = {
        "name": settings["app_name"],
        "route_prefix": "/",
        "import_path": BUILDER_IMPORT,
        "runtime_env": {"py_executable": settings["python"], "env_vars": {k: str(v) for k, v in sorted(env.items())}},
        "args": {
            "llm_configs": llm_configs,
            "ingress_cls_config": {
                "ingress_cls": INGRESS_IMPORT,
                "ingress_extra_kwargs": {"api_key_file": settings["api_key_file"]},
            },
        },
        "deployments": deployments,
    }
    return {
        "proxy_location": settings.get("proxy_location") or "HeadOnly",
        "http_options": {"host": settings["http_host"], "port": int(settings["http_port"])},
        "applications": [app],
    }


def _canonical(value):
    """JSON-stable form: numbers that are whole become ints, dict keys sorted (by json.dumps later)."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _by_name(items):
    return {item.get("name"): item for item in items or [] if isinstance(item, dict)}


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


def normalize(config):
    """A config in the form compared and shown in a diff: whole floats as ints, applications and their
    deployments sorted by name."""
    if config is None:
        return None
    out = _canonical(copy.deepcopy(config))
    apps = sorted(out.get("applications") or [], key=lambda a: a.get("name") or "")
    for app in apps:
        if "deployments" in app:
            app["deployments"] = sorted(app["deployments"], key=lambda d: d.get("name") or "")
    out["applications"] = apps
    return out


def to_text(config):
    """The normalized config as stable, indented JSON (``--diff``)."""
    return json.dumps(normalize(config), indent=2, sort_keys=True) + "\n" if config is not None else ""


def restorable(running):
    """The running config (``running_config``) as a config to send back, for a rollback: None when Serve does not run
    or runs no application that was deployed from a config (nothing to put back)."""
    if not running:
        return None
    apps = [app for app in running.get("applications") or [] if app.get("import_path")]
    if not apps:
        return None
    return normalize(dict(running, applications=apps))


def served_models(config):
    """The OpenAI model ids a Serve config serves (its LLM applications' llm_configs), sorted."""
    names = set()
    for app in (config or {}).get("applications") or []:
        names.update(name for name in _models_of(app) if name)
    return sorted(names)


def _models_of(app):
    configs = ((app or {}).get("args") or {}).get("llm_configs") or []
    return {(c.get("model_loading_config") or {}).get("model_id"): c for c in configs if isinstance(c, dict)}


def classify(desired, running, status=None, max_surge=False):
    """What applying ``desired`` over ``running`` (both normalized or raw; ``running`` None: Serve is not
    running) does.

    Returns {"changed": bool, "kind": "none" | "start" | "in_place" | "rolling", "http_restart": [keys],
    "models": {name: "new" | "removed" | "unchanged" | "in_place" | "engine" | "rebuilt"},
    "last_replica_down": [names]}.

    - in_place: only deployment overrides changed (replicas, autoscaling, surge): no replica restarts.
    - rolling: an application's import_path, runtime_env or args changed: Serve rebuilds it and replaces every
      replica of every deployment in it ("engine": that model's own engine_kwargs or weights changed,
      "rebuilt": replaced because another part of its application changed).
    - last_replica_down: models a rolling replacement leaves without a serving replica for a while: no surge and
      at most one running replica of the model or of the application's ingress (``status``: parse_status of the
      running Serve), or a model removed.
    - http_restart: proxy_location / http_options keys that differ; Serve reads them only when it starts.
    """
    want = normalize(desired)
    have = normalize(running)
    result = {"changed": want != have, "kind": "none", "http_restart": [], "models": {}, "last_replica_down": []}
    if have is None:
        result.update(kind="start", changed=True)
        for app in want["applications"]:
            result["models"].update((name, "new") for name in _models_of(app))
        return result
    for key in ("proxy_location", "http_options"):
        if want.get(key) != have.get(key):
            result["http_restart"].append(key)
    want_apps, have_apps = _by_name(want["applications"]), _by_name(have["applications"])
    kinds = set()
    running_replicas = {}
    for app in (status or {}).values():
        for dep in (app.get("deployments") or {}).values():
            running_replicas[dep["name"]] = dep.get("running", 0)
    for name in sorted(set(want_apps) | set(have_apps)):
        new, old = want_apps.get(name), have_apps.get(name)
        new_models, old_models = _models_of(new), _models_of(old)
        for model in sorted(set(old_models) - set(new_models)):
            result["models"][model] = "removed"
            result["last_replica_down"].append(model)
        if new is None:
            kinds.add("rolling")
            continue
        rebuilt = old is None or any(new.get(k) != old.get(k) for k in CODE_KEYS)
        for model in sorted(new_models):
            if model not in old_models:
                result["models"][model] = "new"
            elif new_models[model] != old_models[model]:
                result["models"][model] = "engine"
            elif rebuilt:
                result["models"][model] = "rebuilt"
            else:
                before = _by_name(old.get("deployments")).get(deployment_name(model))
                after = _by_name(new.get("deployments")).get(deployment_name(model))
                result["models"][model] = "in_place" if before != after else "unchanged"
        if old is not None and rebuilt:
            kinds.add("rolling")
            if not max_surge:
                # A single ingress replica replaced takes every model of the application off the endpoint.
                ingress_down = running_replicas.get(INGRESS_DEPLOYMENT, 0) <= 1
                result["last_replica_down"] += [
                    m
                    for m in sorted(new_models)
                    if m in old_models and (ingress_down or running_replicas.get(deployment_name(m), 0) <= 1)
                ]
        elif old is None:
            kinds.add("rolling")
        elif new != old:
            kinds.add("in_place")
    if result["changed"]:
        result["kind"] = "rolling" if "rolling" in kinds else ("in_place" if kinds else "serve_restart")
    result["last_replica_down"] = sorted(set(result["last_replica_down"]))
    return result


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
