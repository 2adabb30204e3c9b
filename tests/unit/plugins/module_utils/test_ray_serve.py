"""Ray Serve LLM mode: the Serve config, change classification, status parsing, the ingress's key check and the
replicas' engine liveness check."""

import asyncio
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time

from pathlib import Path
from urllib.error import HTTPError

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import serve_models as sm
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients import ray_serve as api
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import serve_config as sc

ROOT = Path(__file__).resolve().parents[4]


def model(name="tiny-llama", **over):
    base = dict(
        name=name,
        model_path="/srv/models/" + name,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        min_replicas=1,
        max_replicas=2,
        target_ongoing_requests=2,
        engine_kwargs={"max_model_len": 256},
    )
    base.update(over)
    return base


SETTINGS = dict(
    app_name="llm",
    python="/opt/vllm/0.29.0-ray2.60.0/bin/python",
    ingress_dir="/usr/local/lib/rayvllm/ray_serve",
    api_key_file="/etc/vllm/ray_serve_api_key",
    http_host="0.0.0.0",
    http_port=8000,
    proxy_location="HeadOnly",
    env_vars={"VLLM_CPU_KVCACHE_SPACE": 1},
    ingress_replicas=2,
    max_surge_percent=0,
)


def config(models=None, **settings):
    return sc.build_config(models or [model(), model("tiny-chat", max_replicas=1)], dict(SETTINGS, **settings))


def details(cfg, app_status="RUNNING", replicas=None):
    """A GET /api/serve/applications/ answer for a Serve running ``cfg``."""
    replicas = replicas or {}
    apps = {}
    for app in cfg["applications"]:
        deployments = {}
        for dep in app["deployments"]:
            count = replicas.get(dep["name"], 1)
            deployments[dep["name"]] = {
                "name": dep["name"],
                "status": "HEALTHY",
                "message": "",
                "target_num_replicas": count,
                "replicas": [{"state": "RUNNING"}] * count,
            }
        apps[app["name"]] = {
            "status": app_status,
            "message": "",
            # Serve answers with floats where the config had ints (a JSON round trip through pydantic).
            "deployed_app_config": json.loads(
                json.dumps(app).replace('"target_ongoing_requests": 2', '"target_ongoing_requests": 2.0')
            ),
            "deployments": deployments,
        }
    return {
        "controller_info": {"actor_id": "abc"},
        "proxy_location": cfg["proxy_location"],
        "http_options": dict(cfg["http_options"], root_path="", request_timeout_s=None),
        "applications": apps,
    }


def test_build_config_writes_what_the_cluster_needs():
    cfg = config()
    app = cfg["applications"][0]
    assert cfg["proxy_location"] == "HeadOnly"
    assert cfg["http_options"] == {"host": "0.0.0.0", "port": 8000}
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    assert app["route_prefix"] == "/"
    # The vLLM venv's interpreter for the build task, the ingress and the replicas; the ingress module on the path.
    assert app["runtime_env"]["py_executable"] == SETTINGS["python"]
    assert app["runtime_env"]["env_vars"] == {"PYTHONPATH": SETTINGS["ingress_dir"], "VLLM_CPU_KVCACHE_SPACE": "1"}
    llama = app["args"]["llm_configs"][0]
    assert llama["model_loading_config"] == {"model_id": "tiny-llama", "model_source": "/srv/models/tiny-llama"}
    assert llama["engine_kwargs"] == {"max_model_len": 256, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    # Each model's replicas: the shipped LLMServer, whose health check asks the engine (Serve replaces a hung one).
    assert llama["server_cls"] == "rayvllm_serve_ingress:LLMServer"
    assert llama["deployment_config"] == {"health_check_period_s": 10, "health_check_timeout_s": 30}
    assert app["args"]["ingress_cls_config"] == {
        "ingress_cls": "rayvllm_serve_ingress:KeyedOpenAiIngress",
        "ingress_extra_kwargs": {"api_key_file": "/etc/vllm/ray_serve_api_key"},
    }
    deployments = {d["name"]: d for d in app["deployments"]}
    # Autoscaling as a deployment override (in place), target_ongoing_requests always written.
    assert deployments["LLMServer:tiny-llama"]["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 2,
        "target_ongoing_requests": 2,
    }
    assert deployments["KeyedOpenAiIngress"]["autoscaling_config"]["min_replicas"] == 2
    assert "max_surge_percent" not in deployments["LLMServer:tiny-llama"]


def test_build_config_surge_sources_and_extra_autoscaling():
    models = [model(autoscaling_config={"downscale_delay_s": 20}, max_ongoing_requests=64)]
    cfg = config(models, max_surge_percent=1, model_sources={"tiny-llama": "/srv/models/tiny-llama.revisions/abc"})
    app = cfg["applications"][0]
    dep = app["deployments"][0]
    assert dep["max_surge_percent"] == 1 and app["deployments"][1]["max_surge_percent"] == 1
    assert dep["autoscaling_config"]["downscale_delay_s"] == 20
    llm = app["args"]["llm_configs"][0]
    assert llm["model_loading_config"]["model_source"] == "/srv/models/tiny-llama.revisions/abc"
    assert llm["deployment_config"] == {"health_check_period_s": 10, "health_check_timeout_s": 30,
                                        "max_ongoing_requests": 64}  # fmt: skip


def test_a_new_ingress_file_is_a_new_code_version():
    one, two = config(code_version="aaaa"), config(code_version="bbbb")
    assert one["applications"][0]["runtime_env"]["env_vars"]["RAYVLLM_SERVE_CODE"] == "aaaa"
    running = api.running_config(details(one))
    assert sc.classify(two, running)["kind"] == "rolling"
    assert sc.classify(config(code_version="aaaa"), running)["changed"] is False


def test_the_key_is_never_in_the_config():
    assert "secret" not in json.dumps(config())
    assert "api_key_file" in json.dumps(config())


def test_deployment_name_follows_ray():
    assert sc.deployment_name("meta-llama/Llama-3.1-8B") == "LLMServer:meta-llama--Llama-3_1-8B"


def test_same_config_is_no_change_even_with_floats_and_order():
    cfg = config()
    running = api.running_config(details(cfg))
    running["applications"][0]["deployments"].reverse()
    change = sc.classify(cfg, running, api.parse_status(details(cfg)))
    assert change["changed"] is False and change["kind"] == "none"
    assert change["models"] == {"tiny-llama": "unchanged", "tiny-chat": "unchanged"}


def test_nothing_running_is_a_start():
    empty = {"controller_info": {}, "applications": {}}
    assert api.running_config(empty) is None
    change = sc.classify(config(), None)
    assert change["kind"] == "start" and change["models"] == {"tiny-llama": "new", "tiny-chat": "new"}


def test_the_running_config_can_be_sent_back_and_names_its_models():
    before = config()
    previous = sc.restorable(api.running_config(details(before)))
    assert sc.served_models(previous) == ["tiny-chat", "tiny-llama"]
    # Sent back, it is the running config again: no change against what ran.
    assert sc.classify(previous, api.running_config(details(before)))["changed"] is False
    assert sc.normalize(previous) == sc.normalize(before)
    # Nothing to put back: Serve not running, or an application Serve shows without a deployed config.
    assert sc.restorable(None) is None
    assert sc.restorable({"proxy_location": "HeadOnly", "applications": [{"name": "llm"}]}) is None
    assert sc.served_models(None) == []


def test_replicas_change_is_in_place():
    before = config()
    after = config([model(min_replicas=2, max_replicas=3), model("tiny-chat", max_replicas=1)])
    change = sc.classify(after, api.running_config(details(before)), api.parse_status(details(before)))
    assert change["kind"] == "in_place"
    assert change["models"] == {"tiny-llama": "in_place", "tiny-chat": "unchanged"}
    assert change["last_replica_down"] == []


def test_engine_change_rolls_every_model_and_names_last_replicas():
    before = config()
    after = config([model(engine_kwargs={"max_model_len": 512}), model("tiny-chat", max_replicas=1)])
    running = details(before, replicas={"LLMServer:tiny-llama": 2, sc.INGRESS_DEPLOYMENT: 2})
    change = sc.classify(after, api.running_config(running), api.parse_status(running))
    assert change["kind"] == "rolling"
    assert change["models"] == {"tiny-llama": "engine", "tiny-chat": "rebuilt"}
    # tiny-llama runs 2 replicas (one at a time is replaced), tiny-chat 1: without surge it has none for a while.
    assert change["last_replica_down"] == ["tiny-chat"]
    # One ingress replica: replacing it takes every model off the endpoint for a while.
    one_ingress = details(before, replicas={"LLMServer:tiny-llama": 2, sc.INGRESS_DEPLOYMENT: 1})
    change = sc.classify(after, api.running_config(one_ingress), api.parse_status(one_ingress))
    assert change["last_replica_down"] == ["tiny-chat", "tiny-llama"]
    surge = sc.classify(after, api.running_config(running), api.parse_status(running), max_surge=True)
    assert surge["last_replica_down"] == []


def test_a_venv_installed_again_in_place_is_a_new_code_version():
    one, two = config(venv_version="1111"), config(venv_version="2222")
    assert one["applications"][0]["runtime_env"]["env_vars"]["RAYVLLM_SERVE_VENV"] == "1111"
    assert "RAYVLLM_SERVE_VENV" not in config()["applications"][0]["runtime_env"]["env_vars"]
    running = api.running_config(details(one))
    assert sc.classify(two, running)["kind"] == "rolling"
    assert sc.classify(config(venv_version="1111"), running)["changed"] is False


def test_weights_and_venv_changes_are_rolling():
    before = config()
    weights = config(model_sources={"tiny-llama": "/srv/models/tiny-llama.revisions/new"})
    venv = config(python="/opt/vllm/0.30.0-ray2.60.0/bin/python")
    for after, models in ((weights, {"tiny-llama": "engine", "tiny-chat": "rebuilt"}), (venv, None)):
        change = sc.classify(after, api.running_config(details(before)), api.parse_status(details(before)))
        assert change["kind"] == "rolling"
        if models:
            assert change["models"] == models


def test_removed_model_is_named():
    before = config()
    after = config([model()])
    change = sc.classify(after, api.running_config(details(before)), api.parse_status(details(before)))
    assert change["models"]["tiny-chat"] == "removed"
    assert "tiny-chat" in change["last_replica_down"]


def test_http_options_change_is_reported():
    before = config()
    change = sc.classify(config(http_port=9000), api.running_config(details(before)))
    assert change["http_restart"] == ["http_options"]
    assert change["kind"] == "serve_restart"


def test_status_names_the_application_and_why():
    cfg = config()
    answer = details(cfg, app_status="DEPLOY_FAILED")
    answer["applications"]["llm"]["message"] = "Deploying app 'llm' failed:\nValueError: bad engine"
    status = api.parse_status(answer)
    assert api.not_running(status, ["llm"]) == [
        "application llm is DEPLOY_FAILED: Deploying app 'llm' failed: ValueError: bad engine"
    ]
    answer = details(cfg, app_status="DEPLOYING")
    answer["applications"]["llm"]["deployments"]["LLMServer:tiny-llama"].update(
        status="UPDATING", message="waiting for resources"
    )
    assert api.not_running(api.parse_status(answer), ["llm"]) == [
        "application llm is DEPLOYING: LLMServer:tiny-llama UPDATING: waiting for resources"
    ]
    assert api.not_running({}, ["llm"]) == ["application llm is not deployed"]
    assert api.not_running(api.parse_status(details(cfg)), ["llm"]) == []


def test_wait_running(fake_clock=None):
    from conftest import FakeClock

    clock = FakeClock()
    cfg = config()
    answers = iter([details(cfg, "DEPLOYING"), details(cfg, "DEPLOYING"), details(cfg)])
    ok, status, problems, waited = api.wait_running(
        lambda: api.parse_status(next(answers)), ["llm"], 60, 5, clock=clock.clock, sleep=clock.sleep
    )
    assert ok and problems == [] and waited == 10
    failed = details(cfg, "DEPLOY_FAILED")
    ok, status, problems, waited = api.wait_running(
        lambda: api.parse_status(failed), ["llm"], 60, 5, clock=clock.clock, sleep=clock.sleep
    )
    assert not ok and waited == 0 and "DEPLOY_FAILED" in problems[0]
    slow = details(cfg, "DEPLOYING")
    ok, status, problems, waited = api.wait_running(
        lambda: api.parse_status(slow), ["llm"], 12, 5, clock=clock.clock, sleep=clock.sleep
    )
    assert not ok and waited == 12


class Response(io.BytesIO):
    status = 200


def test_requests_carry_the_token_and_name_refusals():
    seen = []

    def opener(request, timeout):
        seen.append(request)
        if request.get_method() == "PUT":
            raise HTTPError(request.full_url, 401, "Unauthorized", {}, io.BytesIO(b"no"))
        return Response(json.dumps({"applications": {}}).encode())

    assert api.get_details("http://h:8265/", "tok", opener=opener) == {"applications": {}}
    assert seen[0].full_url == "http://h:8265/api/serve/applications/"
    assert seen[0].get_header("Authorization") == "Bearer tok"
    with pytest.raises(api.ServeError, match="HTTP 401 .Ray token missing or wrong"):
        api.put_config("http://h:8265", {"applications": []}, "tok", opener=opener)
    assert json.loads(seen[1].data) == {"applications": []}


def test_problems_accept_a_good_list():
    assert (
        sm.model_problems(
            [model(), model("tiny-chat")], "b", declared_gpus=4, ray_version="2.60.0", vllm_version="0.29.0"
        )
        == []
    )


@pytest.mark.parametrize(
    "models, text",
    [
        (None, "ray_serve_models is empty"),
        ("x", "not a list"),
        ([model(tensor_parallel_size="2")], "tensor_parallel_size (int, got '2')"),
        ([dict(model(), colour=1)], "unknown fields colour"),
        ([{"name": "a"}], "lacks model_path"),
        ([model(min_replicas=3, max_replicas=2)], "min_replicas 3 is above max_replicas 2"),
        ([model(min_replicas=0)], "min_replicas must be at least 1"),
        ([model(target_ongoing_requests=0)], "target_ongoing_requests must be above 0"),
        ([model(engine_kwargs={"tensor_parallel_size": 2})], "engine_kwargs sets tensor_parallel_size"),
        ([model(engine_kwargs={"api_key": "x"})], "engine_kwargs sets api_key"),
        ([model(autoscaling_config={"max_replicas": 3})], "autoscaling_config sets max_replicas"),
        ([model(), model()], "names tiny-llama more than once"),
        ([model(model_path="models/x")], "model_path must be absolute"),
        ([model(min_replicas=True)], "min_replicas (int, got True)"),
    ],
)
def test_problems(models, text):
    problems = sm.model_problems(models, "b")
    assert any(text in p for p in problems), problems


def test_gpu_need_against_declared():
    problems = sm.model_problems(
        [model(max_replicas=2, tensor_parallel_size=2), model("tiny-chat")], "b", declared_gpus=4
    )
    assert problems == [
        "cluster 'b': the models' replicas need 6 GPUs at max_replicas (max_replicas x tensor_parallel_size x "
        "pipeline_parallel_size: tiny-llama 2 x 2, tiny-chat 2 x 1) but the cluster's nodes declare 4 (ray_num_gpus). "
        "Lower max_replicas or add GPUs."
    ]


def test_vllm_version_must_be_rays_pin():
    problems = sm.model_problems([model()], "b", ray_version="2.60.0", vllm_version="0.31.0")
    assert len(problems) == 1
    assert "Ray 2.60.0's Serve LLM is built for vLLM 0.29.0" in problems[0]
    assert "vllm_version is 0.31.0" in problems[0] and "ray_serve_allow_vllm_version_mismatch" in problems[0]
    assert sm.model_problems([model()], "b", ray_version="2.60.0", vllm_version="0.31.0", allow_mismatch=True) == []
    assert sm.model_problems([model()], "b", ray_version="2.59.0", vllm_version="0.27.0") == []


def test_pin_from_metadata():
    text = 'Requires-Dist: vllm[audio]==0.29.0; extra == "llm"\nRequires-Dist: vllm==0.1; extra == "other"\n'
    assert sm.vllm_pin_from_metadata(text) == "0.29.0"
    assert sm.vllm_pin_from_metadata("Requires-Dist: numpy\n") is None
    assert sm.supports_max_surge("2.60.0") and not sm.supports_max_surge("2.59.0")


# The ingress's key check (roles/ray_serve/files/rayvllm_serve_ingress.py): pure ASGI, no Ray needed.
spec = importlib.util.spec_from_file_location("ingress", ROOT / "roles/ray_serve/files/rayvllm_serve_ingress.py")
ingress = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ingress)


def call(app, path, headers=(), kind="http"):
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    asyncio.run(app({"type": kind, "path": path, "headers": list(headers)}, receive, send))
    return sent


async def inner(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


def test_ingress_requires_the_key(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-key-0123456789\n")
    keys = ingress.KeyFile(str(key_file))
    keys.load()
    app = ingress.BearerKey(inner, keys)
    assert call(app, "/v1/models", [(b"authorization", b"Bearer s3cret-key-0123456789")])[0]["status"] == 200
    for headers in ([], [(b"authorization", b"Bearer wrong")], [(b"authorization", b"s3cret-key-0123456789")]):
        sent = call(app, "/v1/completions", headers)
        assert sent[0]["status"] == 401
        assert b"s3cret" not in sent[1]["body"] and json.loads(sent[1]["body"])["error"]["code"] == 401
    assert call(app, "/health")[0]["status"] == 200
    # vLLM's release, without a key like vLLM's own /version (status.yml reads it); '' where vLLM is not installed.
    version = call(app, "/version")
    assert version[0]["status"] == 200 and json.loads(version[1]["body"]) == {"version": ingress.vllm_version()}
    assert call(app, "/tokenize")[0]["status"] == 401
    assert call(app, "/ws", kind="websocket") == [{"type": "websocket.close", "code": 1008}]


def test_ingress_key_file_rotation_and_failures(tmp_path):
    key_file = tmp_path / "key"
    with pytest.raises(OSError):
        ingress.KeyFile(str(key_file)).load()
    key_file.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        ingress.KeyFile(str(key_file)).load()
    key_file.write_text("first-key-000000")
    keys = ingress.KeyFile(str(key_file))
    keys.load()
    key_file.write_text("second-key-11111111")
    assert keys.current() == b"second-key-11111111"
    key_file.unlink()  # a vanished file keeps the last key: the API never opens
    assert keys.current() == b"second-key-11111111"


# The engine liveness check of each model's replicas (LLMServer in rayvllm_serve_ingress.py).
def test_engine_probe_fences_a_hung_engine_once_after_two_failed_checks():
    probe = ingress.EngineProbe(timeout=0.05, fence_after=2)
    fenced = []

    def fence():
        fenced.append(True)
        return [4242]

    async def hangs():
        await asyncio.sleep(10)

    async def answers():
        return []

    asyncio.run(probe.check(answers, fence))
    with pytest.raises(RuntimeError, match="no answer in 0.05s; 1 failed in a row"):
        asyncio.run(probe.check(hangs, fence))
    assert not fenced  # one slow check is not a hang
    asyncio.run(probe.check(answers, fence))  # an answer resets the count
    for count in (1, 2, 3):
        with pytest.raises(RuntimeError, match="%d failed in a row" % count):
            asyncio.run(probe.check(hangs, fence))
    assert fenced == [True]  # once, at the second failure in a row; Serve replaces the replica after its third


def test_engine_probe_counts_the_engines_own_error():
    probe = ingress.EngineProbe(timeout=1, fence_after=1)

    async def dead():
        raise OSError("EngineDeadError")

    with pytest.raises(RuntimeError, match="EngineDeadError"):
        asyncio.run(probe.check(dead, lambda: []))
    assert probe.fenced


def test_engine_probe_lets_a_busy_engine_pass_until_the_busy_limit():
    now = [0.0]
    probe = ingress.EngineProbe(timeout=0.01, fence_after=2, busy_cpu=1.0, busy_limit=60, clock=lambda: now[0])
    cpu = [0.0]
    fenced = []

    def busy():  # every call: 2 more CPU seconds, nothing stopped
        cpu[0] += 2.0
        return cpu[0], []

    async def hangs():
        await asyncio.sleep(10)

    async def answers():
        return []

    for _check in range(4):  # a long step: no answer, but the engine works
        asyncio.run(probe.check(hangs, lambda: fenced.append(1) or [], busy))
        now[0] += 15
    assert probe.failures == 0 and not fenced
    now[0] += 1  # 61 s since the first unanswered check: over the limit, timeouts count whatever the CPU
    with pytest.raises(RuntimeError, match="1 failed in a row"):
        asyncio.run(probe.check(hangs, lambda: fenced.append(1) or [], busy))
    asyncio.run(probe.check(answers, lambda: [], busy))  # an answer ends the spell
    assert probe.busy_since is None and probe.failures == 0
    asyncio.run(probe.check(hangs, lambda: fenced.append(1) or [], busy))  # busy again: a new spell
    assert probe.failures == 0 and not fenced


def test_engine_probe_fences_a_stopped_or_idle_engine_whatever_the_cpu_of_the_others():
    probe = ingress.EngineProbe(timeout=0.01, fence_after=2, busy_cpu=1.0)
    cpu = [0.0]
    fenced = []

    def one_stopped():  # a worker still spins, the engine process is stopped (SIGSTOP)
        cpu[0] += 5.0
        return cpu[0], [4242]

    async def hangs():
        await asyncio.sleep(10)

    with pytest.raises(RuntimeError, match="1 failed"):
        asyncio.run(probe.check(hangs, lambda: fenced.append(1) or [], one_stopped))
    with pytest.raises(RuntimeError, match="2 failed"):
        asyncio.run(probe.check(hangs, lambda: fenced.append(1) or [], lambda: (cpu[0] + 0.2, [])))  # idle
    assert fenced == [1]

    def broken():
        raise OSError("no /proc")

    probe = ingress.EngineProbe(timeout=0.01, fence_after=5)
    with pytest.raises(RuntimeError, match="1 failed"):  # no usage to go by: the answer alone decides
        asyncio.run(probe.check(hangs, lambda: [], broken))


def test_engine_usage_counts_the_engines_children_and_the_workers_sharing_its_queues():
    # A stand-in replica (this process) whose engine (a child) spins holding a shared-memory queue, and a worker
    # that is not its child (started through a shell that exits: as Ray starts actors) mapping the same segment.
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(create=True, size=4096)
    hold = (
        "import sys, time\nfrom multiprocessing import shared_memory, resource_tracker\n"
        "s = shared_memory.SharedMemory(name=sys.argv[1])\nresource_tracker.unregister(s._name, 'shared_memory')\n"
        "end = time.time() + 60\nwhile time.time() < end: pass\n"
    )
    engine = subprocess.Popen([sys.executable, "-c", hold, segment.name])
    worker = int(
        subprocess.run(
            ["sh", "-c", 'setsid "$0" -c "$1" "$2" >/dev/null 2>&1 & echo $!', sys.executable, hold, segment.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    try:
        for _attempt in range(200):  # both map the queue (a replica's first check comes after its engine's start)
            if segment.name in str(ingress._shared_segments(worker)) and ingress._shared_segments(engine.pid):
                break
            time.sleep(0.05)
        usage = ingress.EngineUsage()
        for _attempt in range(200):
            cpu, stopped = usage()
            if cpu >= 0.3:
                break
            time.sleep(0.05)
        assert usage.workers == [worker] and stopped == []
        children = ingress.descendants(os.getpid())
        assert engine.pid in children and worker not in children  # the worker is no child of the replica
        first = usage()[0]
        time.sleep(0.5)
        assert usage()[0] > first  # both spin
        os.kill(worker, signal.SIGSTOP)
        for _attempt in range(200):
            if usage()[1]:
                break
            time.sleep(0.05)
        assert usage()[1] == [worker]
        alone = ingress.EngineUsage(pid=worker)  # its children (a resource tracker) share no queue with anyone
        assert alone()[1] == [] and alone.workers == []
    finally:
        engine.kill()
        engine.wait()
        os.kill(worker, signal.SIGKILL)
        segment.close()
        segment.unlink()


def test_kill_children_kills_the_descendants_of_a_process_also_stopped_ones():
    # A stand-in replica: its engine process (stopped, as a hung one may be) and the engine's own child.
    engine_code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    code = (
        "import subprocess, sys\n"
        "engine = subprocess.Popen([sys.executable, '-c', %r])\n"
        "print(engine.pid, flush=True)\n"
        "print(engine.wait(), flush=True)\n" % engine_code
    )
    replica = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        engine = int(replica.stdout.readline())
        for _attempt in range(200):
            if ingress.descendants(replica.pid) == [engine] + ingress.descendants(engine) != [engine]:
                break
            time.sleep(0.05)
        tree = ingress.descendants(replica.pid)
        assert len(tree) == 2 and tree[0] == engine, tree
        os.kill(engine, signal.SIGSTOP)
        assert sorted(ingress.kill_children(replica.pid)) == sorted(tree)
        assert replica.stdout.readline().strip() == str(-signal.SIGKILL)  # the replica saw its engine killed
        assert replica.wait(timeout=10) == 0
    finally:
        replica.kill()
        for pid in ingress.descendants(replica.pid):
            os.kill(pid, signal.SIGKILL)
