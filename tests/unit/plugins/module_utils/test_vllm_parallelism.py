import json
import subprocess
import sys

import pytest
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.vllm_parallelism import (
    PlanError,
    model_shape,
    plan,
    running_sizes,
)

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


UNIT = """[Service]
EnvironmentFile=/etc/vllm/vllm.env
# One flag (with its value) per line, so --diff shows which one changed.
ExecStart=/opt/vllm/current/bin/vllm serve /srv/models/tiny-llama \\
    --distributed-executor-backend ray \\
    --tensor-parallel-size 4 \\
    --pipeline-parallel-size 2 \\
    --served-model-name tiny-llama
Restart=on-failure
"""


def test_the_running_units_sizes_are_read_from_its_exec_start():
    assert running_sizes(UNIT) == {"tensor_parallel_size": 4, "pipeline_parallel_size": 2}


def test_a_unit_that_passes_no_size_runs_vllms_defaults_and_one_with_equals_signs_is_read_too():
    bare = "[Service]\nExecStart=/opt/vllm/current/bin/vllm serve /m --port 8000\n"
    assert running_sizes(bare) == {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    equals = "ExecStart=/v/bin/vllm serve /m --tensor-parallel-size=8 '--pipeline-parallel-size=3'\n"
    assert running_sizes(equals) == {"tensor_parallel_size": 8, "pipeline_parallel_size": 3}


def test_a_unit_without_vllm_serve_or_with_an_unreadable_size_gives_none():
    assert running_sizes("[Service]\nExecStart=/bin/true\n") is None
    assert running_sizes("") is None
    assert running_sizes("ExecStart=/v/bin/vllm serve /m --tensor-parallel-size \\\n") is None


def test_module_says_whether_the_plan_changed_from_the_running_unit(tmp_path):
    """A fifth node with 4 GPUs beside two of 4: auto keeps TP 4 and grows PP, which the running unit (TP 4, PP 2)
    does not pass: the plan changed. The same GPUs plan what runs: unchanged. No unit yet: nothing to compare."""
    unit = tmp_path / "vllm.service"
    unit.write_text(UNIT)
    out = run_module(tmp_path, gpus_per_node=[4, 4], running_unit=str(unit))
    assert out["running"] == {"tensor_parallel_size": 4, "pipeline_parallel_size": 2} and out["plan_changed"] is False
    out = run_module(tmp_path, gpus_per_node=[4, 4, 4], running_unit=str(unit))
    assert out["pipeline_parallel_size"] == 3 and out["plan_changed"] is True and out["changed"] is False
    out = run_module(tmp_path, gpus_per_node=[4, 4], running_unit=str(tmp_path / "absent.service"))
    assert out["running"] is None and out["plan_changed"] is False
