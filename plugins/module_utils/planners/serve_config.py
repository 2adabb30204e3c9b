# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The Serve config of a ``ray_serve`` cluster (PUT /api/serve/applications/) and what a change to it does. Plain
Python, unit-tested without Ray, shipped to managed hosts by Ansible's module_utils mechanism (the ``ray_serve_apply``
module). Read from Ray's own source, 2.59.0 and 2.60.0 wheels:

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
- ``http_options`` and ``proxy_location`` are read only when Serve starts: a PUT on a running Serve
  logs a warning and keeps the old ones.
"""

from __future__ import annotations

import copy
import json

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


def deployment_name(model_id):
    """Ray Serve LLM's name of a model's LLM deployment (builder.py, _get_deployment_name)."""
    return "LLMServer:" + model_id.replace("/", "--").replace(".", "_")


def build_config(models, settings):
    """The ServeDeploySchema (PUT /api/serve/applications/) for ``models`` (ray_serve_models, checked).

    ``settings``: app_name, python (the vLLM venv's interpreter), ingress_dir (where
    rayvllm_serve_ingress.py is on every node), api_key_file, http_host, http_port, proxy_location,
    env_vars (the replicas' environment: not secret, the Serve config shows it), ingress_replicas,
    max_surge_percent (0: none; only for Ray >= 2.60), model_sources ({name: path}: the staged
    revision of each model's weights; default its model_path), code_version (a digest of
    rayvllm_serve_ingress.py: a new one rebuilds the application, so every replica runs the shipped code),
    venv_version (a digest of the record of what the venv of ``python`` holds: a venv reinstalled in place, at the
    same path, rebuilds the application too, so no replica keeps running what the venv no longer holds).
    """
    sources = settings.get("model_sources") or {}
    env = dict(settings.get("env_vars") or {})
    env["PYTHONPATH"] = settings["ingress_dir"]
    if settings.get("code_version"):
        env["RAYVLLM_SERVE_CODE"] = settings["code_version"]
    if settings.get("venv_version"):
        env["RAYVLLM_SERVE_VENV"] = settings["venv_version"]
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
