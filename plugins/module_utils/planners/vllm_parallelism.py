# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Plan and validate vLLM's tensor/pipeline parallel sizes for a Ray cluster.

Plain Python, standard library only (unit-tested without Ansible). vLLM's Ray
executor asks Ray for one ``{"GPU": 1}`` bundle per rank and then waits up to
30 minutes for the placement group: a size that cannot fit must fail here, in
seconds, with the rule that was broken and a size that would work.

Rules (vLLM's own, plus one operational rule):

* tensor parallel (TP) divides ``num_attention_heads``;
* the KV heads divide TP, or TP divides the KV heads (vLLM replicates KV heads
  when TP exceeds them);
* pipeline parallel (PP) is at most ``num_hidden_layers``;
* TP x PP is at most the cluster's GPUs;
* TP is at most the GPUs of one node unless cross-node TP is allowed (tensor
  parallel all-reduces every layer and must stay on NVLink; pipeline parallel
  sends activations once per stage and may cross nodes).

Auto (size 0): TP = the largest valid size that fits one node (the smallest
node that has GPUs), PP = the number of nodes that can hold a TP group, at most
the layer count.
"""

from __future__ import annotations


class PlanError(Exception):
    """A parallel plan that cannot run; the message names the rule and an alternative."""


def model_shape(config):
    """``(num_attention_heads, num_key_value_heads, num_hidden_layers)`` from a Hugging Face config.json dict.

    Multimodal configs keep the language model under ``text_config`` (or
    ``llm_config``); a missing ``num_key_value_heads`` means plain multi-head
    attention (as many KV heads as attention heads).
    """
    if not isinstance(config, dict):
        raise PlanError("config.json must hold a JSON object")
    source = config
    if "num_attention_heads" not in source:
        for key in ("text_config", "llm_config", "language_config"):
            if isinstance(config.get(key), dict) and "num_attention_heads" in config[key]:
                source = config[key]
                break
    try:
        heads = int(source["num_attention_heads"])
        layers = int(source["num_hidden_layers"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(
            "config.json lacks a usable %s: cannot check the parallel sizes against the model" % exc
        ) from None
    kv_heads = source.get("num_key_value_heads")
    kv_heads = heads if kv_heads in (None, 0) else int(kv_heads)
    if heads < 1 or layers < 1 or kv_heads < 1:
        raise PlanError(
            "config.json has num_attention_heads=%s, num_key_value_heads=%s, num_hidden_layers=%s: "
            "all must be positive" % (heads, kv_heads, layers)
        )
    return heads, kv_heads, layers


def tp_fits_model(tp, heads, kv_heads):
    return heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0)


def valid_tp_sizes(heads, kv_heads, limit):
    """Every TP size from 1 to ``limit`` that the model's heads allow."""
    return [t for t in range(1, max(0, int(limit)) + 1) if tp_fits_model(t, heads, kv_heads)]


def _sizes(values):
    return ", ".join(str(v) for v in values) or "none"


def plan(config, gpus_per_node, tensor_parallel_size=0, pipeline_parallel_size=0, allow_cross_node_tp=False):
    """Return ``{"tensor_parallel_size", "pipeline_parallel_size", "world_size"}`` or raise PlanError."""
    heads, kv_heads, layers = model_shape(config)
    nodes = [int(g) for g in gpus_per_node]
    if not nodes or any(g < 0 for g in nodes):
        raise PlanError("gpus_per_node must list one non-negative GPU count per Ray node; got %r" % (gpus_per_node,))
    tp = int(tensor_parallel_size or 0)
    pp = int(pipeline_parallel_size or 0)
    if tp < 0 or pp < 0:
        raise PlanError("tensor_parallel_size and pipeline_parallel_size must be 0 (auto) or more")
    total = sum(nodes)
    with_gpus = [g for g in nodes if g > 0]
    if not with_gpus:
        raise PlanError("no Ray node offers a GPU (gpus_per_node=%r): vLLM needs at least one" % (nodes,))
    node_max = max(with_gpus)
    node_min = min(with_gpus)
    tp_limit = total if allow_cross_node_tp else node_max

    if tp == 0:
        candidates = valid_tp_sizes(heads, kv_heads, node_min)
        if not candidates:
            raise PlanError("no tensor parallel size fits %d attention heads" % heads)
        tp = candidates[-1]
    else:
        if heads % tp:
            raise PlanError(
                "tensor_parallel_size %d does not divide num_attention_heads %d: use one of %s"
                % (tp, heads, _sizes(valid_tp_sizes(heads, kv_heads, tp_limit)))
            )
        if not tp_fits_model(tp, heads, kv_heads):
            raise PlanError(
                "tensor_parallel_size %d and num_key_value_heads %d: one must divide the other; use one of %s"
                % (tp, kv_heads, _sizes(valid_tp_sizes(heads, kv_heads, tp_limit)))
            )
        if tp > node_max and not allow_cross_node_tp:
            fit = valid_tp_sizes(heads, kv_heads, node_max)
            alternative = ""
            if fit:
                alt_tp = fit[-1]
                alt_pp = min(layers, sum(g // alt_tp for g in nodes), max(1, (tp * max(pp, 1)) // alt_tp))
                alternative = ": use tensor_parallel_size %d with pipeline_parallel_size %d" % (alt_tp, alt_pp)
            raise PlanError(
                "tensor_parallel_size %d exceeds the %d GPUs of the largest node; tensor parallel traffic must "
                "stay inside a node (NVLink), pipeline parallel crosses nodes%s (or set allow_cross_node_tp)"
                % (tp, node_max, alternative)
            )
    if pp == 0:
        if tp > node_max:  # cross-node TP allowed: one group spans nodes
            pp = max(1, total // tp)
        else:
            pp = max(1, sum(1 for g in nodes if g >= tp))
        pp = min(pp, layers)
    elif pp > layers:
        raise PlanError(
            "pipeline_parallel_size %d exceeds num_hidden_layers %d (each stage needs a layer): use at most %d"
            % (pp, layers, min(layers, max(1, total // tp)))
        )
    world = tp * pp
    if world > total:
        max_pp = total // tp
        hint = (
            "use pipeline_parallel_size %d" % max_pp
            if max_pp >= 1
            else "use tensor_parallel_size %d" % max(valid_tp_sizes(heads, kv_heads, min(total, tp_limit)) or [1])
        )
        raise PlanError(
            "tensor_parallel_size %d x pipeline_parallel_size %d needs %d GPUs but the cluster has %d (%s per node): %s"
            % (tp, pp, world, total, "+".join(str(g) for g in nodes), hint)
        )
    return {"tensor_parallel_size": tp, "pipeline_parallel_size": pp, "world_size": world}


def running_sizes(unit_text):
    """The tensor and pipeline parallel sizes a vLLM unit's ``ExecStart`` passes (``--tensor-parallel-size N`` or
    ``--tensor-parallel-size=N``, continuation lines included), as ``{"tensor_parallel_size",
    "pipeline_parallel_size"}`` (1 for a flag the unit does not pass: vLLM's default), or None when the unit runs
    no ``vllm serve``."""
    command = []
    in_exec = False
    for line in unit_text.splitlines():
        stripped = line.strip()
        if stripped.startswith("ExecStart="):
            in_exec, command = True, []
            stripped = stripped[len("ExecStart=") :]
        elif not in_exec:
            continue
        command.extend(stripped.rstrip("\\").split())
        in_exec = stripped.endswith("\\")
    if "serve" not in command:
        return None
    sizes = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    for index, word in enumerate(command):
        flag, _sep, value = word.strip("'\"").partition("=")
        key = flag.lstrip("-").replace("-", "_")
        if key in sizes:
            value = value or (command[index + 1] if index + 1 < len(command) else "")
            try:
                sizes[key] = int(value.strip("'\""))
            except ValueError:
                return None
    return sizes
