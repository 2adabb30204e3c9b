"""Clients behind vllm-router on the sandbox fleet (clusters default and b serving tiny-llama):

1. router overhead: the same smoke load (REQUESTS completions, CONCURRENCY at a time) straight to cluster
   default's vLLM and through the router with only cluster default in rotation (cluster b held out for the
   measurement, as a rollout holds it): throughput ratio and the p50 latency the router adds;
2. rollout: playbooks/upgrade.yml to the other version pair of the sandbox while CONCURRENCY clients send
   completions through the router: failed requests, p50/p99 latency, play time, and how long each cluster
   was out of rotation.
benchmarks/rollout.sh converges a fleet first (REUSE=1: the converged one)."""

import json
import statistics
import sys
import threading
import time
from pathlib import Path

import testinfra
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "molecule/default"))
from sandbox import (  # noqa: E402
    CLUSTER_URLS,
    ROOT,
    ROUTER_URL,
    SETTINGS,
    RotationWatcher,
    bearer_request,
    playbook,
    rotation,
    task_started,
    vllm_api_key,
    vllm_version,
    wait_for,
)

REQUESTS, CONCURRENCY = 200, 4
PAIRS = [{key: SETTINGS[key] for key in ("ray_version", "vllm_version")},
         yaml.safe_load((ROOT / "molecule/default/vars/upgrade.yml").read_text())]  # fmt: skip
HOLD_B = "/var/lib/vllm-router/holds/tiny-llama@b.json"
BODY = {"model": SETTINGS["vllm_served_model_name"], "prompt": "The capital of France is", "max_tokens": 8}


def one(url):
    started = time.monotonic()
    try:
        ok = bearer_request(url + "/v1/completions", vllm_api_key(), BODY, 60)["usage"]["completion_tokens"] > 0
    except (OSError, ValueError, KeyError):
        ok = False
    return ok, time.monotonic() - started


class Load:
    """CONCURRENCY clients sending completions to url until stopped (or `count` in all)."""

    def __init__(self, url, count=None):
        self.url, self.count, self.results = url, count, []
        self._stop, self._lock = threading.Event(), threading.Lock()

    def _client(self):
        while not self._stop.is_set():
            with self._lock:
                if self.count is not None and len(self.results) + self._inflight >= self.count:
                    return
                self._inflight += 1
            result = one(self.url)
            with self._lock:
                self._inflight -= 1
                self.results.append(result)

    def run(self):
        self._inflight, self.started = 0, time.monotonic()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _client in range(CONCURRENCY)]
        for thread in self.threads:
            thread.start()
        return self

    def stop(self):
        self._stop.set()
        for thread in self.threads:
            thread.join()
        self.elapsed = time.monotonic() - self.started
        return self

    def figures(self):
        latencies = sorted(t for ok, t in self.results if ok)

        def p(q):
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")

        return {"requests": len(self.results), "failed": sum(1 for ok, _latency in self.results if not ok),
                "per_s": len(latencies) / self.elapsed, "p50_ms": 1000 * (statistics.median(latencies) if latencies
                else float("nan")), "p99_ms": 1000 * p(0.99)}  # fmt: skip


def head():
    return testinfra.get_host("docker://ray-head")


def overhead():
    router = head()
    router.check_output(f"""echo '{{"until": 0, "by": "benchmarks/rollout.py", "reason": "overhead run"}}' >{HOLD_B}""")
    router.check_output(f"curl -s -X POST '{ROUTER_URL}/remove_worker?url={CLUSTER_URLS['b']}'")
    try:
        assert wait_for(lambda: rotation() == [CLUSTER_URLS["default"]], timeout=30)
        one(ROUTER_URL), one(CLUSTER_URLS["default"])  # warm up both paths
        direct = Load(CLUSTER_URLS["default"], REQUESTS).run()
        for thread in direct.threads:
            thread.join()
        direct = direct.stop().figures()
        routed = Load(ROUTER_URL, REQUESTS).run()
        for thread in routed.threads:
            thread.join()
        routed = routed.stop().figures()
    finally:
        router.check_output(f"rm -f {HOLD_B}")
        router.check_output(f"curl -s -X POST '{ROUTER_URL}/add_worker?url={CLUSTER_URLS['b']}'")
    for label, f in (("direct to cluster default", direct), ("through the router", routed)):
        print(f"OVERHEAD {label:<26} {f['requests']} requests ({f['failed']} failed), {CONCURRENCY} at a time: "
              f"{f['per_s']:.2f}/s, p50 {f['p50_ms']:.0f} ms, p99 {f['p99_ms']:.0f} ms")  # fmt: skip
    print(f"OVERHEAD throughput ratio router/direct {routed['per_s'] / direct['per_s']:.3f} (target >= 0.97), "
          f"p50 added {routed['p50_ms'] - direct['p50_ms']:.1f} ms")  # fmt: skip


def rollout():
    now = {"ray_version": Path(head().check_output("readlink /opt/ray/current")).name, "vllm_version": vllm_version()}
    target = PAIRS[1] if now == PAIRS[0] else PAIRS[0]
    print(f"ROLLOUT from Ray {now['ray_version']} / vLLM {now['vllm_version']} to Ray {target['ray_version']} / "
          f"vLLM {target['vllm_version']}, both clusters, {CONCURRENCY} clients through the router")  # fmt: skip
    started = time.monotonic()
    with RotationWatcher() as watcher:
        load = Load(ROUTER_URL).run()
        rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(target),
                           env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks"})  # fmt: skip
        load.stop()
    play = time.monotonic() - started
    (ROOT / ".cache" / "bench-rollout.log").write_text(out)
    if rc != 0:
        print(out[-4000:])
        raise SystemExit(f"the rollout failed (exit {rc})")
    f = load.figures()
    print(f"ROLLOUT play {play:.0f} s; {f['failed']} failed of {f['requests']} requests; "
          f"p50 {f['p50_ms']:.0f} ms, p99 {f['p99_ms']:.0f} ms; {f['per_s']:.2f} completions/s")  # fmt: skip
    # Where each cluster's serving stops: vLLM's unit on default; Ray's restart on b (it ends Serve).
    for cluster, marker in (("default", "VLLM | stop vLLM on ray-head"), ("b", "Upgrade | restart Ray on cluster b")):
        stop = task_started(out, marker)
        spans = [s for s in watcher.out_of_rotation(CLUSTER_URLS[cluster]) if stop and s[0] - 1 <= stop <= s[1]]
        took = f"{spans[0][1] - spans[0][0]:.0f} s" if spans else "not seen out"
        print(f"ROLLOUT cluster {cluster}: out of rotation {took} (its vLLM stopped while out: {bool(spans)})")


if __name__ == "__main__":
    overhead()
    rollout()
