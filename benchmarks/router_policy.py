"""The routing policy of the fleet's front door (vllm-router, as the router role starts it), measured on simulated
OpenAI backends that use no CPU to answer: each has a fixed number of slots (requests it serves at once; the rest
wait in its queue) and a fixed time per output token, so its capacity is known exactly:
slots / (max_tokens x seconds per token) completions per second.

For each backend mix (e.g. 1:1 and 1:4 in capacity) and each policy it reports:
- throughput at saturation (2 x the fleet's slots in flight, closed loop) through the router, against the sum of the
  backends' capacities (target: at least 0.9);
- p99 latency at half load (half the fleet's slots in flight) through the router, against the fastest backend alone
  at one request in flight, its unloaded latency (target: at most 1.2x).

Everything runs on this machine's loopback: the backends and the load generator in this process (asyncio, aiohttp),
vllm-router as a subprocess. Run by benchmarks/router_policy.sh, which makes the venv (vllm-router and aiohttp from
the sandbox's router wheelhouse).
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

MODEL = "sim"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Backend:
    """One simulated OpenAI server: ``slots`` requests at once, ``tpot`` seconds per output token."""

    def __init__(self, name, slots, tpot):
        self.name, self.slots, self.tpot = name, slots, tpot
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.served = 0
        self._sem = None
        self._runner = None

    def capacity(self, tokens):
        return self.slots / (tokens * self.tpot)

    async def _complete(self, request):
        body = await request.json()
        tokens = int(body.get("max_tokens") or 16)
        async with self._sem:
            await asyncio.sleep(tokens * self.tpot)
        self.served += 1
        usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": tokens + 4}
        if request.path.endswith("/chat/completions"):
            choice = {"index": 0, "message": {"role": "assistant", "content": "x" * tokens}, "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": "x" * tokens, "finish_reason": "length"}
        return web.json_response({"id": "sim", "object": "text_completion", "model": MODEL, "choices": [choice],
                                  "usage": usage})  # fmt: skip

    async def start(self):
        self._sem = asyncio.Semaphore(self.slots)
        app = web.Application()
        app.router.add_get("/health", lambda _r: web.Response(text="ok"))
        app.router.add_get("/v1/models", lambda _r: web.json_response({"data": [{"id": MODEL, "object": "model"}]}))
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=1024).start()

    async def stop(self):
        await self._runner.cleanup()


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


async def load(url, in_flight, seconds, tokens, warmup=2.0, model=MODEL):
    """A closed loop of ``in_flight`` clients for ``seconds`` (after ``warmup``): completions/s, p50, p99, failed."""
    latencies, failed = [], 0
    deadline_warm = time.monotonic() + warmup
    deadline = deadline_warm + seconds
    body = {"model": model, "prompt": "Hello", "max_tokens": tokens}
    timeout = ClientTimeout(total=120)
    async with ClientSession(connector=TCPConnector(limit=0), timeout=timeout) as session:

        async def client():
            nonlocal failed
            while time.monotonic() < deadline:
                started = time.monotonic()
                try:
                    async with session.post(url + "/v1/completions", json=body) as response:
                        await response.read()
                        ok = response.status == 200
                except Exception:  # noqa: BLE001 - any failure counts as a failed request
                    ok = False
                ended = time.monotonic()
                if started >= deadline_warm and ended <= deadline:
                    if ok:
                        latencies.append(ended - started)
                    else:
                        failed += 1

        await asyncio.gather(*(client() for _client in range(in_flight)))
    return {
        "rate": len(latencies) / seconds,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "failed": failed,
        "completed": len(latencies),
    }


def router_args(policy, port, metrics_port, urls):
    """vllm-router's arguments as the router role writes them (roles/router/tasks/configure.yml, its defaults)."""
    return ["--host", "127.0.0.1", "--port", str(port), "--policy", policy,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
            "--retry-max-retries", "3", "--disable-circuit-breaker",
            "--health-check-interval-secs", "5", "--health-failure-threshold", "2",
            "--health-success-threshold", "1", "--worker-startup-timeout-secs", "120",
            "--worker-startup-check-interval", "1", "--request-timeout-secs", "120",
            "--log-level", "warning", "--worker-urls", *urls]  # fmt: skip


async def wait_answers(url, timeout=60, model=MODEL):
    deadline = time.monotonic() + timeout
    body = {"model": model, "prompt": "Hi", "max_tokens": 1}
    async with ClientSession(timeout=ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            try:
                async with session.post(url + "/v1/completions", json=body) as response:
                    if response.status == 200:
                        return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            await asyncio.sleep(0.5)
    raise SystemExit("the router at %s did not answer within %d s" % (url, timeout))


async def scenario(name, specs, policies, router_bin, seconds, tokens):
    backends = [Backend("%s-%d" % (name, i), slots, tpot) for i, (slots, tpot) in enumerate(specs)]
    for backend in backends:
        await backend.start()
    try:
        total = sum(b.capacity(tokens) for b in backends)
        slots = sum(b.slots for b in backends)
        fastest = max(backends, key=lambda b: 1 / b.tpot)
        alone = await load(fastest.url, 1, seconds, tokens)
        print("%s: backends %s; capacity %.1f/s in all; fastest alone (1 in flight): p99 %.0f ms"
              % (name, ", ".join("%d slots x %.0f ms/token" % (b.slots, b.tpot * 1000) for b in backends), total,
                 alone["p99"] * 1000), flush=True)  # fmt: skip
        rows = []
        for policy in policies:
            port, metrics = free_port(), free_port()
            router = subprocess.Popen(  # noqa: S603 - our own venv's vllm-router, fixed arguments
                [router_bin, *router_args(policy, port, metrics, [b.url for b in backends])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            url = "http://127.0.0.1:%d" % port
            try:
                await wait_answers(url)
                for b in backends:
                    b.served = 0
                full = await load(url, 2 * slots, seconds, tokens)
                shares = [b.served for b in backends]
                half = await load(url, max(1, slots // 2), seconds, tokens)
            finally:
                os.killpg(router.pid, signal.SIGTERM)
                router.wait(timeout=30)
            row = {
                "mix": name, "policy": policy, "capacity": round(total, 2),
                "saturation_rate": round(full["rate"], 2), "saturation_ratio": round(full["rate"] / total, 3),
                "saturation_failed": full["failed"], "served_by_backend": shares,
                "half_load_p99_ms": round(half["p99"] * 1000, 1),
                "fastest_alone_p99_ms": round(alone["p99"] * 1000, 1),
                "half_load_p99_ratio": round(half["p99"] / alone["p99"], 3), "half_load_failed": half["failed"],
            }  # fmt: skip
            rows.append(row)
            print("  %-20s saturation %.1f/s = %.3f of capacity (%d failed; per backend %s); half load p99 %.0f ms = "
                  "%.2fx the fastest alone (%d failed)"
                  % (policy, full["rate"], row["saturation_ratio"], full["failed"], shares, half["p99"] * 1000,
                     row["half_load_p99_ratio"], half["failed"]), flush=True)  # fmt: skip
        return rows
    finally:
        for backend in backends:
            await backend.stop()


def parse_mix(text):
    """'8x10,8x40' -> [(8, 0.010), (8, 0.040)]: slots x milliseconds per output token, per backend."""
    specs = []
    for part in text.split(","):
        slots, ms = part.lower().split("x")
        specs.append((int(slots), float(ms) / 1000))
    return specs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--router", required=True, help="the vllm-router executable")
    parser.add_argument("--mix", action="append", required=True, help="NAME=SLOTSxMS,SLOTSxMS,... (repeatable)")
    parser.add_argument("--policies", default="power_of_two")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args(argv)
    rows = []
    for mix in args.mix:
        name, specs = mix.split("=", 1)
        rows += asyncio.run(scenario(name, parse_mix(specs), args.policies.split(), args.router, args.seconds,
                                     args.tokens))  # fmt: skip
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
