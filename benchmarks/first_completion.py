"""How long cluster default's vLLM takes to serve again after a restart, split into "answers /health" and "the
first completion" (with torch.compile on, its ranks compile a few kernels with torch's inductor on their first
forward pass, and the compile cache in Ray's temp directory, roles/vllm/vars/main.yml, makes that a cache load; the
sandbox's inventory turns compile off, TORCHDYNAMO_DISABLE, see docs/benchmarks.md#compile-cache):
  1. vLLM restart, cache as the fleet has it; 2. vLLM restart again (cache warm);
  3. Ray restart on every node of the cluster, then vLLM (before the cache moved out of the Ray units'
     private /tmp, this one always compiled from scratch).
benchmarks/first-completion.sh converges a fleet first (REUSE=1: the converged one)."""

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "molecule/default"))
from sandbox import VLLM_URL, bearer_request, complete  # noqa: E402


def restart(host, unit):
    subprocess.run(["docker", "exec", host, "systemctl", "restart", unit], check=True)


def measure(what):
    started = time.monotonic()
    while True:
        try:
            bearer_request(VLLM_URL + "/health", None, timeout=5)
            break
        except OSError:
            time.sleep(0.5)
    healthy = time.monotonic()
    complete(timeout=600)
    first = time.monotonic()
    print(f"{what + ':':<40} /health after {healthy - started:5.1f} s, first completion {first - healthy:5.1f} s later")


def main():
    for what in ("vLLM restart", "vLLM restart (cache warm)"):
        restart("ray-head", "vllm")
        measure(what)
    restart("ray-head", "ray-head")
    restart("ray-worker-1", "ray-worker")
    restart("ray-worker-2", "ray-worker")
    # vllm.service requires ray-head.service: it restarted with it and waits for the workers to rejoin.
    measure("Ray restart on every node, then vLLM")


if __name__ == "__main__":
    main()
