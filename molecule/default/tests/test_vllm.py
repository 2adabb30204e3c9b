"""vLLM served on the sandbox through the real Ray executor (CPU build standing in for CUDA)."""

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import testinfra
from sandbox import (
    HEAD_IP,
    NODE_IPS,
    SETTINGS,
    TIMED,
    alive_nodes,
    bearer_request,
    playbook,
    ray_api,
    task_results,
    vllm_api_key,
)

testinfra_hosts = ["ansible://ray-head"]  # cluster default's head (cluster b: tests/test_router.py)
ROOT = Path(__file__).resolve().parents[3]
URL = f"http://{HEAD_IP}:{SETTINGS.get('vllm_port', 8000)}"
MODEL = SETTINGS["vllm_served_model_name"]
VENV_PYTHON = "/opt/vllm/current/bin/python"
VENV = f"{SETTINGS['vllm_version']}-ray{SETTINGS['ray_version']}"
COMPILE_CACHE = f"{SETTINGS.get('ray_temp_dir', '/var/lib/ray/tmp')}/compile-cache/torchinductor"


def node(name):
    return testinfra.get_host("docker://" + name)


def http(path, body=None, key=True, timeout=600):
    return bearer_request(URL + path, vllm_api_key() if key is True else key, body, timeout)


def generation_tokens():
    text = http("/metrics", key="")
    values = re.findall(r"^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    assert values, "vllm:generation_tokens_total missing from /metrics"
    return sum(float(v) for v in values)


def main_pids():
    pids = {"vllm": node("ray-head").check_output("systemctl show -p MainPID --value vllm")}
    for name in NODE_IPS:
        unit = "ray-head" if name == "ray-head" else "ray-worker"
        pids[name] = node(name).check_output(f"systemctl show -p MainPID --value {unit}")
    return pids


def test_completion_through_the_openai_client(host):
    script = (
        "from openai import OpenAI; import json, sys;"
        f"c = OpenAI(base_url='{URL}/v1', api_key='{vllm_api_key()}');"
        f"r = c.completions.create(model='{MODEL}', prompt='Hello, my name is', max_tokens=8, temperature=0);"
        "print(json.dumps({'tokens': r.usage.completion_tokens, 'text': r.choices[0].text}))"
    )
    out = json.loads(host.check_output(f'{VENV_PYTHON} -c "{script}"'))
    assert out["tokens"] >= 1


def test_models_endpoint_needs_the_api_key():
    with pytest.raises(urllib.error.HTTPError) as err:
        http("/v1/models", key="")
    assert err.value.code == 401
    assert [m["id"] for m in http("/v1/models")["data"]] == [MODEL]


def test_api_key_is_not_on_the_command_line_or_in_readable_files(host):
    key = vllm_api_key()
    assert key not in host.check_output("systemctl show vllm")
    assert key not in host.check_output("ps -eo args")
    env_file = host.file("/etc/vllm/vllm.env")
    assert env_file.mode == 0o600 and env_file.user == "root"


def rank_pids():
    """{host: [pid of each of vLLM's rank workers there]}, every rank of cluster default found."""
    path = "/api/v0/actors?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE&limit=1000&detail=true"
    actors = ray_api(path)["data"]["result"]["result"]
    workers = [a for a in actors if "RayWorker" in a.get("class_name", "")]
    tp = SETTINGS["vllm_tensor_parallel_size"] * SETTINGS["vllm_pipeline_parallel_size"]
    assert len(workers) == tp, [a.get("class_name") for a in actors]
    ip_of = {n["node_id"]: n["node_ip"] for n in alive_nodes()}
    name_of = {ip: name for name, ip in NODE_IPS.items()}
    hosts = {}
    for actor in workers:
        hosts.setdefault(name_of[ip_of[actor["node_id"]]], []).append(actor["pid"])
    return hosts


def test_ray_workers_run_on_two_hosts_from_the_vllm_venv():
    hosts = rank_pids()
    assert len(hosts) >= 2, hosts
    for name, pids in hosts.items():
        for pid in pids:
            # Ray retitles its workers ("ray::RayWorkerProc.run"), and a venv's python is a link to the
            # system one: what the process loaded tells which venv it runs.
            maps = node(name).check_output(f"cat /proc/{pid}/maps")
            raylet = set(re.findall(r"(/opt/\S+/site-packages/ray/_raylet\.so)", maps))
            assert raylet == {f"/opt/vllm/{VENV}/lib/python3.11/site-packages/ray/_raylet.so"}, (name, pid, raylet)
            assert "/opt/ray/" not in maps, (name, pid)
            # Each worker inherits its node's cluster address (multi-NIC servers: the address NCCL and vLLM use).
            environ = node(name).check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
            assert f"VLLM_HOST_IP={NODE_IPS[name]}" in environ, (name, pid)
            # Their inductor cache lives in Ray's temp directory, not the Ray unit's private /tmp (lost on
            # every Ray restart). The sandbox turns torch.compile off (TORCHDYNAMO_DISABLE in its
            # ray_environment), so nothing is compiled into it here: see docs/testing.md.
            assert f"TORCHINDUCTOR_CACHE_DIR={COMPILE_CACHE}" in environ, (name, pid)
            # And every variable of ray_environment (Ray's unit passes it on to its workers).
            for key, value in SETTINGS["ray_environment"].items():
                assert f"{key}={value}" in environ, (name, pid, key)
            # The engine loads the staged weights and never calls the hub.
            assert "HF_HUB_OFFLINE=1" in environ, (name, pid)


def test_the_vllm_server_never_calls_the_hub():
    pid = node("ray-head").check_output("systemctl show -p MainPID --value vllm")
    environ = node("ray-head").check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
    assert "HF_HUB_OFFLINE=1" in environ


def test_each_rank_runs_one_gloo_loop_thread():
    # The sandbox's CPU shim (tests/fixtures/vllm-cpu) gives all of a process's gloo groups one device: each device's
    # loop thread wakes every 10 ms, and with one per group (13 per rank) the idle ranks took about a third of one
    # of this machine's 2 cores from every stage of CI.
    for name, pids in rank_pids().items():
        for pid in pids:
            names = node(name).check_output(f"cat /proc/{pid}/task/*/comm").splitlines()
            assert names.count("gloo_tcp_loop") == 1, (name, pid, names.count("gloo_tcp_loop"))


def test_generation_tokens_counter_rises_after_a_request():
    before = generation_tokens()
    out = http("/v1/completions", {"model": MODEL, "prompt": "One two three", "max_tokens": 6, "temperature": 0})
    assert out["usage"]["completion_tokens"] >= 1
    after = generation_tokens()
    assert after >= before + out["usage"]["completion_tokens"], (before, after)


def test_smoke_playbook_prints_throughput_and_latency():
    rc, out = playbook("playbooks/smoke.yml", "-e", "smoke_requests=6", "-e", "smoke_concurrency=2")
    assert rc == 0, out[-3000:]
    assert re.search(r'succeeded"?: 6\b', out), out[-2000:]
    assert "output_tokens_per_s" in out and "latency_p95_s" in out


def test_bad_model_path_on_workers_fails_before_vllm_restarts(host):
    host.run_expect([0], "mkdir -p /srv/models/only-on-head")
    host.run_expect([0], "cp /srv/models/tiny-llama/config.json /srv/models/only-on-head/")
    before = main_pids()
    # Cluster default's hosts: cluster b (Ray Serve LLM) stages its own models' weights.
    limit = ",".join(NODE_IPS)
    rc, out = playbook(
        "playbooks/vllm.yml", "--limit", limit, "-e", "model_source=shared", "-e", "model_path=/srv/models/only-on-head"
    )
    assert rc != 0
    assert "/srv/models/only-on-head/config.json is missing on ray-worker-1" in out
    assert "/srv/models/only-on-head/config.json is missing on ray-worker-2" in out
    assert main_pids() == before
    assert http("/health", key="") == ""


def test_a_rerun_changes_and_restarts_nothing():
    before = main_pids()
    # Each task's time (profile_tasks) into the run's log, .cache/verify-rerun.log: where a slow no-op spends it.
    rc, out = playbook("site.yml", env=TIMED)
    (ROOT / ".cache").mkdir(exist_ok=True)
    (ROOT / ".cache/verify-rerun.log").write_text(out)
    assert rc == 0, out[-3000:]
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)
    assert recap and all(changed == "0" for _host, changed in recap), (recap, changed_tasks(out))
    assert main_pids() == before


def changed_tasks(out):
    """(task, host) of every change a playbook's output reports: what a re-run that should change nothing changed."""
    return [(task, host) for task, status, host in task_results(out) if status == "changed"]


def test_each_model_left_the_controller_once_for_the_fleet_and_the_other_nodes_fetched_it_from_peers():
    """model_distribution: peers (the default) in the converge: tiny-llama, which both clusters serve (cluster default
    through vllm serve, b through Ray Serve LLM), left the controller once, for the first node of the play that stages
    it; the other nodes fetched it from peers, each file checked against the manifest that every node now holds, the
    same on each; tiny-chat, which b alone serves, went to ray-b-head."""
    log = (ROOT / ".cache/converge-vvv.log").read_text()
    copied = sorted(
        (task.split("from the controller (")[1].split(",")[0], host)
        for task, status, host in task_results(log)
        if "copy the weights from the controller (" in task and status == "changed"
    )
    # tiny-llama to the first node of the play that stages it (in the inventory's order), tiny-chat to b's head.
    llama = [host for model, host in copied if model == "tiny-llama"]
    assert len(llama) == 1 and copied == sorted([("tiny-chat", "ray-b-head"), ("tiny-llama", llama[0])]), copied
    said = " ".join(log.split())
    for name in {"ray-head", "ray-worker-1", "ray-worker-2", "ray-b-head"} - set(llama):
        assert f"{name}: fetching the weights from " in said, name
    manifests = {
        name: testinfra.get_host("docker://" + name).check_output("cat /srv/models/tiny-llama/.rayvllm-manifest.json")
        for name in ("ray-head", "ray-worker-1", "ray-worker-2", "ray-b-head")
    }
    assert len(set(manifests.values())) == 1, manifests
    assert any(f["path"] == "config.json" for f in json.loads(manifests["ray-head"])["files"])
