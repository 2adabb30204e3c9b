import json
import subprocess
import sys

import pytest
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils.vllm_parallelism import PlanError, model_shape, plan

LLAMA_70B = {"num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80}
LLAMA_8B = {"num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32}
TINY = {"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}  # the CI model
MODULE = ROOT / "plugins/modules/vllm_parallelism.py"


def sizes(result):
    return result["tensor_parallel_size"], result["pipeline_parallel_size"], result["world_size"]


def test_auto_fills_nodes_with_tp_and_spans_nodes_with_pp():
    assert sizes(plan(LLAMA_70B, [8, 8, 8])) == (8, 3, 24)
    assert sizes(plan(LLAMA_8B, [4])) == (4, 1, 4)


def test_auto_tp_is_the_largest_divisor_that_fits_the_smallest_node():
    assert sizes(plan({"num_attention_heads": 40, "num_hidden_layers": 40}, [8, 8])) == (8, 2, 16)
    assert sizes(plan({"num_attention_heads": 12, "num_hidden_layers": 12}, [8])) == (6, 1, 6)
    assert sizes(plan(LLAMA_8B, [8, 4])) == (4, 2, 8)


def test_auto_pp_is_bounded_by_layers():
    assert sizes(plan(TINY, [1, 1, 1, 1])) == (1, 2, 2)


def test_explicit_sizes_pass_through():
    assert sizes(plan(LLAMA_70B, [8, 8], 8, 2)) == (8, 2, 16)
    assert sizes(plan(LLAMA_70B, [8, 8], 4, 0)) == (4, 2, 8)


def test_tp_must_divide_heads():
    rule = r"tensor_parallel_size 3 does not divide num_attention_heads 32: use one of 1, 2, 4, 8"
    with pytest.raises(PlanError, match=rule):
        plan(LLAMA_8B, [8], 3)


def test_kv_heads_and_tp_must_divide_one_another():
    config = {"num_attention_heads": 24, "num_key_value_heads": 8, "num_hidden_layers": 4}
    with pytest.raises(PlanError, match=r"num_key_value_heads 8: one must divide the other; use one of 1, 2, 4, 8"):
        plan(config, [8], 6)
    assert sizes(plan(TINY, [2, 2], 4, 1, allow_cross_node_tp=True)) == (4, 1, 4)  # KV heads 2 divide TP 4


def test_tp_larger_than_a_node_names_the_alternative():
    with pytest.raises(PlanError) as err:
        plan(LLAMA_70B, [8, 8], 16)
    message = str(err.value)
    assert "tensor_parallel_size 16 exceeds the 8 GPUs of the largest node" in message
    assert "use tensor_parallel_size 8 with pipeline_parallel_size 2" in message


def test_cross_node_tp_when_allowed():
    assert sizes(plan(TINY, [2, 2, 2], 4, allow_cross_node_tp=True)) == (4, 1, 4)


def test_pp_beyond_layers():
    with pytest.raises(PlanError, match=r"pipeline_parallel_size 3 exceeds num_hidden_layers 2 .*use at most 2"):
        plan(TINY, [1, 1, 1], 1, 3)


def test_world_larger_than_cluster():
    rule = r"needs 24 GPUs but the cluster has 16 \(8\+8 per node\): use pipeline_parallel_size 2"
    with pytest.raises(PlanError, match=rule):
        plan(LLAMA_70B, [8, 8], 8, 3)


def test_no_gpu_anywhere():
    with pytest.raises(PlanError, match="no Ray node offers a GPU"):
        plan(LLAMA_8B, [0, 0])


def test_nodes_without_gpus_are_ignored_by_auto():
    assert sizes(plan(LLAMA_8B, [0, 4, 4])) == (4, 2, 8)


def test_multimodal_config_reads_text_config():
    config = {"architectures": ["LlavaForConditionalGeneration"], "text_config": LLAMA_8B}
    assert model_shape(config) == (32, 8, 32)


def test_kv_heads_default_to_heads_and_missing_keys_fail():
    assert model_shape({"num_attention_heads": 16, "num_hidden_layers": 2}) == (16, 16, 2)
    with pytest.raises(PlanError, match="num_hidden_layers"):
        model_shape({"num_attention_heads": 16})


def run_module(tmp_path, **args):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(args.pop("config", LLAMA_8B)))
    args.setdefault("model_config_path", str(config))
    payload = json.dumps({"ANSIBLE_MODULE_ARGS": args})
    proc = subprocess.run(
        [sys.executable, str(MODULE)],
        input=payload,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "collections")},
        check=False,
    )
    return json.loads(proc.stdout)


def test_module_returns_plan_never_changed(tmp_path):
    out = run_module(tmp_path, gpus_per_node=[4, 4])
    assert out["changed"] is False
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"], out["world_size"]) == (4, 2, 8)


def test_module_fails_with_rule(tmp_path):
    out = run_module(tmp_path, gpus_per_node=[4, 4], tensor_parallel_size=8)
    assert out["failed"] is True
    assert "exceeds the 4 GPUs of the largest node" in out["msg"]


def test_module_missing_config(tmp_path):
    out = run_module(tmp_path, gpus_per_node=[4], model_config_path=str(tmp_path / "nope.json"))
    assert out["failed"] is True and "cannot read the model config" in out["msg"]
