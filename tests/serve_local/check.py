"""End-to-end checks of Ray Serve LLM mode on the local test bed (tests/serve_local/bed.sh check [STEP...]).

Each step applies a config through rayvllm.fleet.ray_serve_apply (ansible-playbook tests/serve_local/apply.yml,
a real PUT with the Ray token) and probes the Serve HTTP port with urllib. Steps (default: all, in order):

  deploy    two tiny models; both answer /v1/completions with the key, 401 without, /health 200
  noop      the same config again: changed=false
  replicas  tiny-llama min_replicas 1 -> 2 -> 1 while a client loops on completions: in place, failures counted
  scale     a bounded load on tiny-llama: 1 -> 2 replicas and back to 1 after it (times printed)
  engine    an engine_kwargs change of tiny-llama while a client loops: a rolling replacement, failures counted

Prints one line per figure (FIGURE name value) and exits non-zero on the first failed expectation.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BED = Path(os.environ.get("BED", "/var/tmp/rayvllm-serve-local"))
SERVE = "http://127.0.0.1:%s" % os.environ.get("SERVE_PORT", "18000")
DASHBOARD = "http://127.0.0.1:%s" % os.environ.get("DASHBOARD_PORT", "18265")
KEY = (BED / "etc/api_key").read_text().strip()
TOKEN = (BED / "etc/auth_token").read_text().strip()
RAY_VERSION = os.environ.get("RAY_VERSION", "2.60.0")
SURGE = int(os.environ.get("SURGE", "1"))


def model(name, path, min_replicas=1, max_replicas=1, target=2, **extra):
    return dict(
        name=name,
        model_path=str(BED / "models" / path),
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_ongoing_requests=target,
        engine_kwargs=dict(extra.pop("engine_kwargs", {"enforce_eager": True, "max_model_len": 256})),
        **extra,
    )


def models(llama_min=1, llama_max=2, engine=None):
    # Short autoscaling delays so the test sees a scale-down within a minute (Serve's default waits 600 s).
    auto = {"upscale_delay_s": 3, "downscale_delay_s": 20, "metrics_interval_s": 1, "look_back_period_s": 5}
    llama = model("tiny-llama", "tiny-llama", llama_min, llama_max, 2, autoscaling_config=auto)
    if engine:
        llama["engine_kwargs"].update(engine)
    return [llama, model("tiny-chat", "tiny-chat", 1, 1, 4)]


SETTINGS = dict(
    app_name="llm",
    python=str(BED / "venv/bin/python"),
    ingress_dir=str(BED / "ingress"),
    api_key_file=str(BED / "etc/api_key"),
    http_host="127.0.0.1",
    http_port=int(os.environ.get("SERVE_PORT", "18000")),
    proxy_location="HeadOnly",
    ingress_replicas=1,
    max_surge_percent=SURGE,
    ray_version=RAY_VERSION,
    env_vars={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"},
)


def apply(model_list, check=False, gate=True):
    """Run apply.yml; returns the module's result."""
    extra = dict(
        bed_dashboard_url=DASHBOARD,
        bed_token_file=str(BED / "etc/auth_token"),
        bed_key_file=str(BED / "etc/api_key"),
        bed_serve_url=SERVE,
        bed_models=model_list,
        bed_settings=SETTINGS,
        bed_gate=gate,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(extra, handle)
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), str(HERE / "apply.yml"), "-e", "@" + handle.name]
    if check:
        argv += ["--check", "--diff"]
    started = time.monotonic()
    run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    os.unlink(handle.name)
    elapsed = time.monotonic() - started
    try:
        out = json.loads(run.stdout)
    except ValueError:
        sys.exit("apply.yml printed no JSON: %s %s" % (run.stdout[-2000:], run.stderr[-2000:]))
    tasks = out["plays"][0]["tasks"]
    result = tasks[0]["hosts"]["localhost"]
    if run.returncode != 0:
        failed = [t["hosts"]["localhost"].get("msg") for t in tasks if t["hosts"]["localhost"].get("failed")]
        sys.exit("apply.yml failed: %s" % failed)
    assert KEY not in run.stdout and KEY not in run.stderr, "the API key is in the playbook's output"
    result["elapsed_s"] = round(elapsed, 1)
    return result


def http(path, body=None, key=KEY, timeout=60):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(SERVE + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def complete(name, tokens=8, key=KEY, timeout=120):
    return http(
        "/v1/completions", {"model": name, "prompt": "Hello", "max_tokens": tokens, "temperature": 0}, key, timeout
    )


def serve_status():
    request = urllib.request.Request(
        DASHBOARD + "/api/serve/applications/", headers={"Authorization": "Bearer " + TOKEN}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def running_replicas(name):
    app = serve_status()["applications"].get("llm") or {}
    dep = (app.get("deployments") or {}).get("LLMServer:" + name.replace(".", "_")) or {}
    return sum(1 for r in dep.get("replicas") or [] if r.get("state") == "RUNNING")


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def figure(name, value):
    print("FIGURE %s %s" % (name, value), flush=True)


class Load:
    """``clients`` threads completing on ``name`` until stopped; counts answers and failures."""

    def __init__(self, name, clients, tokens=16):
        self.name, self.tokens = name, tokens
        self.ok = self.failed = 0
        self.errors = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for n in range(clients)]

    def loop(self):
        while not self.stop.is_set():
            try:
                status, body = complete(self.name, self.tokens)
            except Exception as exc:  # noqa: BLE001 - every failure counts
                status, body = 0, str(exc).encode()
            with self.lock:
                if status == 200:
                    self.ok += 1
                else:
                    self.failed += 1
                    self.errors.append((status, body[:200]))

    def __enter__(self):
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join()
        self.seconds = time.monotonic() - self.started


def step_deploy():
    result = apply(models())
    figure("deploy_apply_s", result["elapsed_s"])
    expect(
        result["changed"] and result["change"]["kind"] in ("start", "rolling"),
        "first apply changed (%s)" % result["change"]["kind"],
    )
    config = json.dumps(serve_status())
    expect(KEY not in config, "the API key is not in GET /api/serve/applications/")
    for name in ("tiny-llama", "tiny-chat"):
        status, body = complete(name)
        expect(status == 200 and json.loads(body)["usage"]["completion_tokens"] > 0, "%s completes with the key" % name)
        expect(complete(name, key=None)[0] == 401, "%s: 401 without a key" % name)
        expect(complete(name, key="wrong-key-wrong-key")[0] == 401, "%s: 401 with a wrong key" % name)
    expect(http("/v1/models", key=None)[0] == 401, "/v1/models: 401 without a key")
    models_listed = sorted(m["id"] for m in json.loads(http("/v1/models")[1])["data"])
    expect(models_listed == ["tiny-chat", "tiny-llama"], "/v1/models lists both models: %s" % models_listed)
    expect(http("/health", key=None)[0] == 200, "/health: 200 without a key")


def step_noop():
    result = apply(models(), gate=False)
    expect(not result["changed"], "the same config again: changed=false (kind %s)" % result["change"]["kind"])
    check = apply(models(), check=True)
    expect(not check["changed"], "--check --diff of the same config: no change")


def step_replicas():
    plan = apply(models(llama_min=2), check=True)
    expect(plan["change"]["kind"] == "in_place", "check mode: a min_replicas change is in place (%s)" % plan["change"])
    with Load("tiny-llama", 2) as load:
        time.sleep(3)
        up = apply(models(llama_min=2), gate=False)
        deadline = time.monotonic() + 300
        while running_replicas("tiny-llama") < 2 and time.monotonic() < deadline:
            time.sleep(1)
        two = running_replicas("tiny-llama")
        down = apply(models(llama_min=1), gate=False)
        time.sleep(3)
    figure("replicas_change_requests", load.ok + load.failed)
    figure("replicas_change_failed", load.failed)
    expect(
        up["change"]["kind"] == "in_place" and down["change"]["kind"] == "in_place",
        "min_replicas 1 -> 2 -> 1 applied in place",
    )
    expect(two == 2, "tiny-llama ran 2 replicas at min_replicas 2")
    expect(
        load.failed == 0, "no failed request during the replicas change (%d answered): %s" % (load.ok, load.errors[:3])
    )


def step_scale():
    deadline = time.monotonic() + 180
    while running_replicas("tiny-llama") != 1 and time.monotonic() < deadline:
        time.sleep(2)
    expect(running_replicas("tiny-llama") == 1, "tiny-llama back at 1 replica before the load")
    with Load("tiny-llama", 8, tokens=32) as load:
        started = time.monotonic()
        deadline = started + 300
        while running_replicas("tiny-llama") < 2 and time.monotonic() < deadline:
            time.sleep(1)
        up_s = time.monotonic() - started
        scaled = running_replicas("tiny-llama") >= 2
        time.sleep(5)
    figure("scale_up_s", round(up_s, 1))
    figure("scale_load_requests", load.ok + load.failed)
    figure("scale_load_failed", load.failed)
    expect(scaled, "8 clients raised tiny-llama to 2 replicas in %.0f s" % up_s)
    started = time.monotonic()
    deadline = started + 300
    while running_replicas("tiny-llama") > 1 and time.monotonic() < deadline:
        time.sleep(2)
    down_s = time.monotonic() - started
    figure("scale_down_s", round(down_s, 1))
    expect(
        running_replicas("tiny-llama") == 1, "back to 1 replica %.0f s after the load (downscale_delay_s 20)" % down_s
    )
    expect(load.failed == 0, "no failed request under the load (%d answered)" % load.ok)


def step_engine():
    plan = apply(models(engine={"max_num_seqs": 64}), check=True)
    expect(plan["change"]["kind"] == "rolling", "check mode: an engine_kwargs change is rolling")
    figure("engine_change_plan", json.dumps(plan["change"], sort_keys=True))
    with Load("tiny-llama", 2) as load:
        time.sleep(3)
        result = apply(models(engine={"max_num_seqs": 64}))
        time.sleep(3)
    figure("engine_change_apply_s", result["elapsed_s"])
    figure("engine_change_requests", load.ok + load.failed)
    figure("engine_change_failed", load.failed)
    expect(
        load.failed == 0,
        "no failed request during the engine_kwargs change (%d answered): %s" % (load.ok, load.errors[:3]),
    )


STEPS = {
    "deploy": step_deploy,
    "noop": step_noop,
    "replicas": step_replicas,
    "scale": step_scale,
    "engine": step_engine,
}

if __name__ == "__main__":
    for step in sys.argv[1:] or list(STEPS):
        print("== %s" % step, flush=True)
        STEPS[step]()
