"""Flags the roles set refused in the passthroughs, resources Ray counts itself, the GPUs a cluster declares against
its parallel plan, a vLLM that listens on loopback while others reach it over the network, the hub repository id."""

import copy

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import model as model_inputs
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import ray as ray_inputs
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import vllm as vllm_inputs


def fleet(gpus=(2, 2), monitoring="gpu-1", router=None, mode="vllm_serve"):
    hosts = ["gpu-%d" % (i + 1) for i in range(len(gpus))]
    nodes = {
        h: {"cluster": "default", "role": "head" if i == 0 else "worker",
            "settings": {"vllm_serving_mode": mode, "ray_num_gpus": g}}
        for i, (h, g) in enumerate(zip(hosts, gpus, strict=True))
    }  # fmt: skip
    routers = {"hosts": [], "models": {}}
    if router:
        routers = {"hosts": [router], "models": {"m": {"backends": [{"cluster": "default", "url": "http://x:8000"}]}}}
    return {
        "nodes": nodes,
        "clusters": {"default": {"head": "gpu-1", "hosts": hosts, "gpus_per_node": list(gpus)}},
        "routers": routers,
        "monitoring": {"host": monitoring, "addresses": {monitoring: "10.0.0.9"} if monitoring else {}},
    }


VLLM = {
    "vllm_version": "0.32.0", "vllm_venvs_keep": 1, "vllm_stop_timeout": 60, "vllm_model_path": "/srv/models/m",
    "vllm_served_model_name": "m", "vllm_tensor_parallel_size": 0, "vllm_pipeline_parallel_size": 0,
    "vllm_port": 8000, "vllm_host": "0.0.0.0", "vllm_gpu_memory_utilization": 0.9, "vllm_max_model_len": None,
    "vllm_extra_args": [], "vllm_environment": {}, "vllm_api_key": "k" * 32, "vllm_user": "ray", "vllm_group": "ray",
}  # fmt: skip


def vllm_problems(model=None, host="gpu-1", **values):
    return vllm_inputs.problems(dict(VLLM, **values), host, model or fleet(), {"model_source": "shared"})


def test_vllm_flags_the_role_sets_are_refused_naming_what_to_set_instead():
    (problem,) = vllm_problems(vllm_extra_args=["--port", "9000", "--host=127.0.0.1", "-tp", "2", "--enforce-eager"])
    assert problem.startswith("vllm_extra_args on gpu-1 sets --port, --host, -tp, which the vllm role sets itself")
    assert problem.endswith("set vllm_port, vllm_host, vllm_tensor_parallel_size instead.")
    (problem,) = vllm_problems(vllm_extra_args=["--distributed-executor-backend", "mp"])
    assert "--distributed-executor-backend" in problem and "nothing (the fleet runs vLLM on its Ray cluster" in problem
    assert vllm_problems(vllm_extra_args=["--enforce-eager", "--max-num-seqs", "64", "--port-offset"]) == []


@pytest.mark.parametrize("listen", ["127.0.0.1", "::1", "localhost"])
def test_a_loopback_vllm_is_refused_when_others_reach_it_over_the_network(listen):
    (problem,) = vllm_problems(fleet(monitoring="mon-1", router="rt-1"), vllm_host=listen)
    expected = "vllm_host on gpu-1 is %s, a loopback address, but mon-1, rt-1 reach cluster default" % listen
    assert problem.startswith(expected)
    # Alone on its head (Prometheus there, no router): it may.
    assert vllm_problems(fleet(monitoring="gpu-1"), vllm_host=listen) == []
    assert vllm_problems(fleet(monitoring="mon-1"), host="gpu-2", vllm_host=listen) == []  # a worker serves nothing


def test_the_gpus_a_cluster_declares_against_its_plan():
    (problem,) = vllm_problems(fleet(gpus=(0, 0)))
    assert problem.startswith("Cluster 'default' declares no GPU (ray_num_gpus is 0 on each of its 2 nodes)")
    (problem,) = vllm_problems(fleet(gpus=(2, 2)), vllm_tensor_parallel_size=4, vllm_pipeline_parallel_size=2)
    assert "declares 4 GPUs (ray_num_gpus 2+2), but vllm_tensor_parallel_size 4 x " in problem
    assert "vllm_pipeline_parallel_size 2 needs 8" in problem
    assert vllm_problems(fleet(gpus=(2, 2)), vllm_tensor_parallel_size=2, vllm_pipeline_parallel_size=2) == []
    # One size set, the other auto (0, so at least 1): the set one alone is more than the cluster declares.
    (problem,) = vllm_problems(fleet(gpus=(1, 1)), vllm_tensor_parallel_size=8)
    assert (
        "declares 2 GPUs (ray_num_gpus 1+1), but vllm_tensor_parallel_size 8 x vllm_pipeline_parallel_size 0 needs 8"
        in problem
    )
    (problem,) = vllm_problems(fleet(gpus=(1, 1)), vllm_pipeline_parallel_size=3)
    assert "needs 3" in problem
    assert vllm_problems(fleet(gpus=(1, 1)), vllm_tensor_parallel_size=2) == []
    assert vllm_problems(fleet(gpus=(None, 2))) == []  # Ray detects them: checked against the live cluster later
    assert vllm_problems(fleet(gpus=(0, 0), mode="ray_serve")) == []  # ray_serve's own checks count replicas' GPUs
    assert vllm_problems(fleet(gpus=(0, 0)), host="gpu-2") == []  # once per cluster, on its head


def test_the_plan_against_the_model_config_is_for_vllm_serve_clusters_only(tmp_path):
    """With the weights on the controller, preflight plans TP x PP against the model's config: a ray_serve cluster
    plans each model's replicas instead, whatever the vllm_serve sizes say (the sandbox's cluster b: 3 GPUs, the
    group's vllm_tensor_parallel_size 4)."""
    (tmp_path / "config.json").write_text('{"num_attention_heads": 4, "num_key_value_heads": 4}')
    context = {"model_source": "controller", "model_controller_path": str(tmp_path)}
    values = dict(VLLM, vllm_tensor_parallel_size=4, vllm_pipeline_parallel_size=1)
    (problem,) = vllm_inputs.problems(values, "gpu-1", fleet(gpus=(3,)), context)
    assert problem.startswith("vLLM cannot run cluster 'default' as planned (vllm_tensor_parallel_size 4")
    assert vllm_inputs.problems(values, "gpu-1", fleet(gpus=(3,), mode="ray_serve"), context) == []


def test_a_served_model_name_is_one_string():
    (problem,) = [p for p in vllm_problems(vllm_served_model_name=["a", "b"]) if "vllm_served_model_name" in p]
    assert problem.startswith("vllm_served_model_name on gpu-1 is a list, ['a', 'b']: give one name, a string")
    assert vllm_problems(vllm_served_model_name="meta-llama/Llama-3.1-8B-Instruct") == []


RAY = {"ray_num_gpus": 2, "ray_num_cpus": None, "ray_resources": {}, "ray_extra_start_args": []}


def ray_problems(**values):
    found = ray_inputs.problems(dict(RAY, **values), "gpu-1", fleet(), {})
    return [p for p in found if "ray_resources" in p or "ray_extra_start_args" in p]


def test_ray_flags_the_role_sets_are_refused_naming_what_to_set_instead():
    args = ["--port=6380", "--dashboard-port", "9999", "--include-dashboard=true"]
    (problem,) = ray_problems(ray_extra_start_args=args)
    assert problem.startswith("ray_extra_start_args on gpu-1 sets --port, --dashboard-port, which the ray role sets")
    assert problem.endswith("set ray_gcs_port, ray_dashboard_port instead.")
    assert ray_problems(ray_extra_start_args=["--system-config={}", '--labels={"zone": "a"}']) == []


def test_resources_ray_counts_itself_are_refused():
    (problem,) = ray_problems(ray_resources={"GPU": 4, "memory": 1, "nvme": 1})
    assert problem.startswith("ray_resources on gpu-1 names GPU, memory, which Ray counts itself")
    assert "set ray_num_gpus instead of GPU" in problem and "remove memory (Ray measures the node's memory)" in problem
    assert ray_problems(ray_resources={"nvme": 1, "accelerator_type:H100": 1}) == []


@pytest.mark.parametrize("repo", ["https://huggingface.co/meta-llama/Llama-3.1-8B", "meta-llama", "/srv/x/y", "a/b/c"])
def test_a_hub_repository_is_an_id_not_a_url(repo):
    values = {"model_path": "/srv/models/l", "model_source": "hf", "model_hf_repo": repo, "model_hf_revision": "a" * 40}
    (problem,) = model_inputs.problems(values, "gpu-1", copy.deepcopy(fleet()), {})
    assert problem.startswith("model_hf_repo on gpu-1 is '%s': give the hub's repository id, owner/name" % repo)
    values["model_hf_repo"] = "meta-llama/Llama-3.1-8B"
    assert model_inputs.problems(values, "gpu-1", fleet(), {}) == []


def test_an_object_store_of_the_hosts_memory_or_more_is_refused():
    values = dict(RAY, ray_object_store_memory=64 * 1024**3)
    found = ray_inputs.problems(values, "gpu-1", fleet(), {"probe": {"memory_mib": 32 * 1024}})
    (problem,) = [p for p in found if "ray_object_store_memory" in p]
    assert problem.startswith(
        "ray_object_store_memory on gpu-1 is 68719476736 bytes (65536 MiB), but the host has 32768"
    )
    fits = ray_inputs.problems(
        dict(values, ray_object_store_memory=8 * 1024**3), "gpu-1", fleet(), {"probe": {"memory_mib": 32768}}
    )
    assert not [p for p in fits if "ray_object_store_memory" in p]
    unread = ray_inputs.problems(values, "gpu-1", fleet(), {})  # no probe (the role run alone): Ray says it at start
    assert not [p for p in unread if "ray_object_store_memory" in p]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"vllm_port": "8000/tcp"},
            "vllm_port on gpu-1 is '8000/tcp': not a port number (a whole number from 1 to 65535)",
        ),
        ({"vllm_port": 0}, "vllm_port on gpu-1 is 0: not a port number"),
        (
            {"vllm_model_path": "models/m"},
            "vllm_model_path on gpu-1 is 'models/m': not an absolute path. Set model_path",
        ),
        ({"vllm_tensor_parallel_size": "two"}, "vllm_tensor_parallel_size on gpu-1 is 'two': not a whole number"),
        (
            {"vllm_gpu_memory_utilization": 1.5},
            "vllm_gpu_memory_utilization on gpu-1 is '1.5': not a fraction in (0, 1]",
        ),
        ({"vllm_max_model_len": "4k"}, "vllm_max_model_len on gpu-1 is '4k': not a whole number"),
        (
            {"vllm_extra_args": "--enforce-eager"},
            "vllm_extra_args on gpu-1 is a string, '--enforce-eager': give a list",
        ),
        ({"vllm_environment": ["A=1"]}, "vllm_environment on gpu-1 is a list, ['A=1']: give a mapping"),
        ({"vllm_served_model_name": ""}, "vllm_served_model_name on gpu-1 is empty"),
    ],
)
def test_each_unusable_vllm_setting_is_named_alone(values, expected):
    """One message per unusable setting, naming it and its value; the settings that are fine are not named (one
    message used to list every requirement whichever failed)."""
    (problem,) = [p for p in vllm_problems(**values) if not p.startswith("Cluster ")]
    assert problem.startswith(expected), problem


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("var/lib/vllm", "not an absolute path"),
        ("", "not an absolute path"),
        (None, "not an absolute path"),
        ("/var/lib/vllm/", "not written as the path it resolves to (/var/lib/vllm)"),
        ("/var/lib/../vllm", "not written as the path it resolves to (/var/vllm)"),
    ],
)
def test_the_vllm_and_ray_directories_are_absolute_and_normalised(path, what):
    (problem,) = [p for p in vllm_problems(vllm_data_dir=path) if p.startswith("vllm_data_dir")]
    assert problem.startswith("vllm_data_dir on gpu-1 is ") and what in problem, problem
    ray = {"ray_version": "2.60.0", "ray_temp_dir": path}
    assert any(p.startswith("ray_temp_dir on gpu-1 is ") for p in ray_inputs.problems(ray, "gpu-1", fleet(), {}))
    assert not [p for p in vllm_problems(vllm_data_dir="/var/lib/vllm") if p.startswith("vllm_data_dir")]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"ray_num_cpus": "four"}, ["ray_num_cpus on gpu-1 is 'four': not a whole number"]),
        ({"ray_num_gpus": -1}, ["ray_num_gpus on gpu-1 is -1: not a whole number"]),
        ({"ray_resources": ["fast"]}, ["ray_resources on gpu-1 is a list, ['fast']: give a mapping"]),
    ],
)
def test_each_unusable_ray_resource_setting_is_named_alone(values, expected):
    """Only the wrong one (a single message listed both counts and the mapping, the fine ones included)."""
    ray = {"ray_version": "2.60.0", "ray_num_gpus": 2, "ray_num_cpus": None, "ray_resources": {}, **values}
    found = [p for p in ray_inputs.problems(ray, "gpu-1", fleet(), {}) if p.startswith(("ray_num", "ray_resources"))]
    assert [p[: len(e)] for p, e in zip(found, expected, strict=False)] == expected and len(found) == 1, found
