# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The models of a ``ray_serve`` cluster (ray_serve_models): what makes them unusable, and whether a rolling change
can surge. Plain Python, unit-tested without Ray; the ray_serve role's input checks and its filters call it.

- What Ray's ``[llm]`` extra pins (``Requires-Dist: vllm[audio]==X; extra == "llm"`` in the Ray wheel's METADATA):
  Ray's LLM module imports vLLM internals that move between releases.
- Ray Serve learnt ``max_surge_percent`` in 2.60.0: replacements start before old replicas stop.
"""

from __future__ import annotations

import re

# What Ray's `[llm]` extra pins (Requires-Dist: vllm[audio]==X; extra == "llm" in the Ray wheel's
# METADATA). Ray's LLM module imports vLLM internals that move between releases: another vLLM is
# refused unless ray_serve_allow_vllm_version_mismatch is set. A Ray version missing here is read
# from the installed wheel (vllm_pin_from_metadata) on the hosts.
RAY_LLM_VLLM_PINS = {"2.59.0": "0.27.0", "2.60.0": "0.29.0"}

# Ray Serve learnt max_surge_percent in 2.60.0.
MAX_SURGE_SINCE = (2, 60, 0)

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
