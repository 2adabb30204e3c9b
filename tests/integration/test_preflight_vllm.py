"""Bad vLLM settings fail in preflight (or before vLLM starts), naming the rule and the host."""

import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, local_hosts

TINY_LLAMA = ROOT / "tests/fixtures/vllm-cpu/tiny_llama.py"  # 4 attention heads, 2 KV heads, 2 layers


@pytest.fixture
def model_dir(tmp_path):
    out = tmp_path / "tiny-llama"
    subprocess.run([sys.executable, str(TINY_LLAMA), str(out)], check=True, capture_output=True)
    return str(out)


def vllm_vars(model_dir, **extra):
    return {
        "model_source": "controller",
        "model_controller_path": model_dir,
        "model_path": "/srv/models/tiny-llama",
        "ray_num_gpus": 2,
        **extra,
    }


def test_a_fitting_plan_passes(run_preflight, model_dir):
    rc, out = run_preflight(local_hosts(), vllm_vars(model_dir, vllm_tensor_parallel_size=2))
    assert rc == 0, out


def test_tp_not_dividing_the_heads(run_preflight, model_dir):
    rc, out = run_preflight(local_hosts(), vllm_vars(model_dir, vllm_tensor_parallel_size=3))
    assert rc != 0
    assert "tensor_parallel_size 3 does not divide num_attention_heads 4: use one of 1, 2" in out


def test_tp_larger_than_a_node(run_preflight, model_dir):
    rc, out = run_preflight(local_hosts(), vllm_vars(model_dir, vllm_tensor_parallel_size=4))
    assert rc != 0
    assert "tensor_parallel_size 4 exceeds the 2 GPUs of the largest node" in out
    assert "use tensor_parallel_size 2 with pipeline_parallel_size 2" in out


def test_pp_larger_than_the_layers(run_preflight, model_dir):
    rc, out = run_preflight(
        local_hosts(workers=("node-b", "node-c")),
        vllm_vars(model_dir, vllm_tensor_parallel_size=1, vllm_pipeline_parallel_size=3),
    )
    assert rc != 0
    assert "pipeline_parallel_size 3 exceeds num_hidden_layers 2" in out


def test_unpinned_vllm_version(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_version": "latest"})
    assert rc != 0
    assert "vllm_version must be an exact X.Y.Z release" in out


def test_api_key_on_the_command_line_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_extra_args": ["--api-key", "hunter2"]})
    assert rc != 0
    assert "Set vllm_api_key (from a vault) instead" in out
    assert "hunter2" not in out


def test_controller_model_without_config(run_preflight, tmp_path):
    rc, out = run_preflight(local_hosts(), vllm_vars(str(tmp_path)))
    assert rc != 0
    assert "has no config.json on the controller" in out


def test_vllm_venv_with_another_ray_fails_naming_the_host(run_preflight, tmp_path):
    """A vLLM venv whose ray differs from the cluster's stops the vLLM play before the server is touched."""
    root = tmp_path / "opt-vllm"
    venv = root / "0.32.0-ray2.60.0"
    # What the venv's files say (the check reads them, it starts no interpreter): Python 3.11.2, ray 2.59.0.
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    (venv / "lib/python3.11/site-packages/ray-2.59.0.dist-info").mkdir(parents=True)
    (venv / ".rayvllm-requirements").write_text(
        "# Written by rayvllm.fleet after a successful pip install; delete to force a reinstall.\n"
        "interpreter: /usr/bin/python3\n"
        "requirements: vllm==0.32.0 ray[default]==2.60.0\n"
        "pip_args: \n"
    )
    hosts = local_hosts(**{h: {"ansible_become": False} for h in ("node-a", "node-b")})
    rc, out = run_preflight(
        hosts,
        {"vllm_install_root": str(root), "vllm_system_packages": [], "ray_python_interpreter": "/usr/bin/python3"},
        playbook="playbooks/vllm.yml",
    )
    assert rc != 0
    assert f"{venv} on node-a has Ray '2.59.0' but the cluster runs 2.60.0" in out
    # The play names as playbooks/vllm.yml has them now: a renamed play cannot leave a check that never fails.
    install_play, head_plays = vllm_play_headers()
    assert install_play in out, out[-3000:]
    for play in head_plays:
        assert play not in out, out[-3000:]


def vllm_play_headers():
    """The headers Ansible prints ("PLAY [name]") for playbooks/vllm.yml's install play (every Ray node) and its
    plays on the heads (serve, then the check that every head served), found by their hosts; fails if the playbook
    no longer has exactly one install play and at least one play on the heads."""
    plays = yaml.safe_load((ROOT / "playbooks/vllm.yml").read_text())
    by_hosts = {}
    for play in plays:
        by_hosts.setdefault(play.get("hosts"), []).append(play["name"])
    install, heads = by_hosts.get("ray_head:ray_workers", []), by_hosts.get("ray_head", [])
    assert len(install) == 1 and heads and len(by_hosts) == 2, f"playbooks/vllm.yml's plays changed: {by_hosts}"
    return f"PLAY [{install[0]}]", [f"PLAY [{name}]" for name in heads]


RAY_SERVE_MODEL = {
    "name": "m",
    "model_path": "/srv/models/example",
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "min_replicas": 1,
    "max_replicas": 1,
    "target_ongoing_requests": 4,
    "engine_kwargs": {},
}


def test_ray_serve_cluster_whose_hosts_disagree_on_the_mode(run_preflight):
    hosts = local_hosts(**{"node-b": {"vllm_serving_mode": "ray_serve"}})
    rc, out = run_preflight(hosts, {"ray_serve_models": [RAY_SERVE_MODEL], "ray_num_gpus": 1})
    assert rc != 0
    assert "cluster 'default': vllm_serving_mode must be the same on every node" in out
    assert "ray_serve on node-b" in out


def test_ray_serve_cluster_with_another_vllm_than_ray_pins(run_preflight):
    rc, out = run_preflight(
        local_hosts(),
        {"vllm_serving_mode": "ray_serve", "ray_serve_models": [RAY_SERVE_MODEL], "ray_num_gpus": 1},
    )
    assert rc != 0
    assert "Ray 2.60.0's Serve LLM is built for vLLM 0.29.0" in out and "vllm_version is 0.32.0" in out
    assert "ray_serve_allow_vllm_version_mismatch" in out


def test_ray_serve_http_port_other_than_the_api_port_is_refused(run_preflight):
    rc, out = run_preflight(
        local_hosts(),
        {"vllm_serving_mode": "ray_serve", "ray_serve_models": [RAY_SERVE_MODEL], "ray_num_gpus": 1,
         "vllm_version": "0.29.0", "vllm_port": 8001},
    )  # fmt: skip
    assert rc != 0
    assert "ray_serve_http_port is 8000 but vllm_port is 8001" in out
    assert "set both to the same port" in out


def test_a_model_path_the_role_would_move_or_remove_is_refused(run_preflight):
    """A system directory written with '..', which also holds the venvs, and a hub URL for the repository id: every
    reason named in one run."""
    repo = "https://huggingface.co/meta-llama/Llama-3.1-8B"
    rc, out = run_preflight(
        local_hosts(), {"model_path": "/srv/models/../../opt", "model_source": "hf", "model_hf_repo": repo}
    )
    text = " ".join(out.split())
    assert rc != 0
    assert f"model_hf_repo on node-a is '{repo}': give the hub's repository id, owner/name" in text
    assert "model_path on node-a is '/srv/models/../../opt': write it normalised" in text
    assert "model_path on node-a is /opt, a system directory" in text
    assert "model_path /opt on node-a holds vllm_install_root=/opt/vllm" in text


def test_a_model_path_that_is_a_directory_without_weights_is_refused_in_preflight(run_preflight, model_dir, tmp_path):
    not_weights = tmp_path / "srv/data"
    not_weights.mkdir(parents=True)
    rc, out = run_preflight(local_hosts(), vllm_vars(model_dir, model_path=str(not_weights)))
    assert rc != 0
    assert f"model_path {not_weights} on node-a is a directory that holds no config.json" in " ".join(out.split())
    assert not_weights.is_dir() and not not_weights.is_symlink()


def test_flags_the_vllm_role_sets_and_a_cluster_without_gpus_are_refused(run_preflight):
    """Passthrough flags the role owns, and GPU arithmetic against what the cluster declares: one run, both named."""
    rc, out = run_preflight(
        local_hosts(), {"vllm_extra_args": ["--port", "9000", "--enforce-eager"], "ray_num_gpus": 0}
    )
    text = " ".join(out.split())
    assert rc != 0
    assert "vllm_extra_args on node-a sets --port, which the vllm role sets itself" in text
    assert "set vllm_port instead" in text
    assert "Cluster 'default' declares no GPU (ray_num_gpus is 0 on each of its 2 nodes)" in text


def test_each_unusable_ray_serve_setting_is_named_on_its_own(run_preflight):
    """One message per setting (the role's one assert listed every requirement, the fine ones included)."""
    rc, out = run_preflight(
        local_hosts(),
        {"vllm_serving_mode": "ray_serve", "ray_serve_models": [RAY_SERVE_MODEL], "ray_num_gpus": 1,
         "vllm_version": "0.29.0", "ray_serve_app_name": "my app", "ray_serve_max_surge_percent": 150},
    )  # fmt: skip
    assert rc != 0
    flat = " ".join(out.split())
    assert "ray_serve_app_name on node-a is 'my app': not an application name" in flat, out[-3000:]
    assert "ray_serve_max_surge_percent on node-a is 150: more than 100" in flat
    assert "ray_serve_proxy_location" not in flat


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("vllm_serving_mode", "ray_servee", "one of vllm_serve, ray_serve"),
        ("vllm_ready_timeout", "soon", "a whole number"),
    ],
)
def test_a_vllm_option_outside_its_spec_is_refused_naming_it_and_the_host(run_preflight, name, value, expected):
    """A typo in the serving mode (or any vLLM option its argument spec refuses) stops preflight, before any host
    changes, naming the variable, the host and what it must be."""
    rc, out = run_preflight(local_hosts(), {name: value})
    flat = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert f"{name} on node-a must be" in flat and expected in flat, out[-3000:]
