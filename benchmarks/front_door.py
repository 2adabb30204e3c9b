"""Two ways of putting every model of the fleet at one URL, measured on simulated OpenAI backends (those of
benchmarks/router_policy.py: a fixed number of slots and a fixed time per output token, no CPU to answer):

- haproxy: HAProxy reads each request's model and sends it to that model's vllm-router instance (the configuration
  plugins/module_utils/planners/front_door.py builds), in front of one vllm-router per model as the router role
  runs them;
- igw: one vllm-router in its multi-model mode (``--enable-igw``), each (backend, model) registered with
  ``POST /workers``.

The fleet simulated: cluster "default" serves tiny-llama; cluster "b" serves tiny-llama and tiny-chat (one URL, as
Ray Serve does). For each way it reports what a client sees (GET /v1/models, an unknown model's answer, whether every
tiny-chat request reached b) and, for tiny-llama, the latency at one request in flight (p50, p99) and the throughput
at saturation (2 x the slots in flight), against the same through its vllm-router alone (today's per-model port).
Targets (issue 56): throughput through the door at least 0.97 of the router alone's; the latency it adds, printed.

Run by benchmarks/front_door.sh (the venv of benchmarks/router_policy.sh, HAProxy from Debian's package unpacked).
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from aiohttp import ClientSession, ClientTimeout, web

from router_policy import Backend, free_port, load, router_args, wait_answers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "collections"), os.path.join(ROOT, "roles", "router", "files")]
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import front_door  # noqa: E402
from vllm_router_launch import with_workable_policy  # noqa: E402  # the policy the router host's launcher starts

SLOTS, TPOT = 8, 0.010


class ModelBackend(Backend):
    """A simulated cluster that serves only its models: another model gets vLLM's 404."""

    def __init__(self, name, slots, tpot, models):
        super().__init__(name, slots, tpot)
        self.models = models
        self.by_model = {}

    async def _complete(self, request):
        body = await request.json()
        model = body.get("model")
        if model not in self.models:
            message = "The model `%s` does not exist." % model
            return web.json_response({"error": {"message": message, "type": "NotFoundError", "code": 404}}, status=404)
        self.by_model[model] = self.by_model.get(model, 0) + 1
        return await super()._complete(request)


def start(argv):
    """ARGV in a session of its own (its output shown with DEBUG=1)."""
    output = None if os.environ.get("DEBUG") else subprocess.DEVNULL
    # Our own venv's vllm-router and Debian's haproxy, fixed arguments.
    return subprocess.Popen(argv, stdout=output, stderr=output, start_new_session=True)  # noqa: S603


def stop(process):
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


async def probe(url):
    """What a client sees: the model list, an unknown model's status and message."""
    async with ClientSession(timeout=ClientTimeout(total=30)) as session:
        async with session.get(url + "/v1/models") as response:
            models = await response.text()
        body = {"model": "nope", "prompt": "Hi", "max_tokens": 1}
        async with session.post(url + "/v1/completions", json=body) as response:
            unknown = (response.status, (await response.text())[:200])
    return {"models": models[:300], "unknown_status": unknown[0], "unknown_body": unknown[1]}


async def measure(url, model, seconds, tokens, slots):
    quiet = await load(url, 1, seconds, tokens, model=model)
    full = await load(url, 2 * slots, seconds, tokens, model=model)
    return {"p50_ms": round(quiet["p50"] * 1000, 2), "p99_ms": round(quiet["p99"] * 1000, 2),
            "saturation_rate": round(full["rate"], 2), "failed": quiet["failed"] + full["failed"]}  # fmt: skip


async def chat_routing(url, seconds, tokens, b_chat):
    """tiny-chat and tiny-llama at once through URL: tiny-chat's requests that reached b, and any failure."""
    before = b_chat.by_model.get("tiny-chat", 0)
    chat, llama = await asyncio.gather(
        load(url, 4, seconds, tokens, warmup=0, model="tiny-chat"),
        load(url, 4, seconds, tokens, warmup=0, model="tiny-llama"),
    )
    return {"tiny_chat_completed": chat["completed"], "tiny_chat_failed": chat["failed"],
            "tiny_chat_at_b": b_chat.by_model.get("tiny-chat", 0) - before,
            "tiny_llama_failed": llama["failed"]}  # fmt: skip


async def igw_register(url, workers):
    async with ClientSession(timeout=ClientTimeout(total=30)) as session:
        for worker_url, model in workers:
            async with session.post(url + "/workers", json={"url": worker_url, "model_id": model}) as response:
                await response.read()
        async with session.get(url + "/workers") as response:
            return (await response.text())[:300]


async def run(args):
    default = ModelBackend("default", SLOTS, TPOT, {"tiny-llama"})
    b = ModelBackend("b", SLOTS, TPOT, {"tiny-llama", "tiny-chat"})
    for backend in (default, b):
        await backend.start()
    rows, processes = {}, []
    try:
        routers = {}
        for model, urls in (("tiny-llama", [default.url, b.url]), ("tiny-chat", [b.url])):
            port, metrics = free_port(), free_port()
            argv = with_workable_policy(router_args("power_of_two", port, metrics, urls), urls)
            processes.append(start([args.router, *argv]))
            routers[model] = "127.0.0.1:%d" % port
            await wait_answers("http://" + routers[model], model=model)
        rows["router alone"] = await measure("http://" + routers["tiny-llama"], "tiny-llama", args.seconds,
                                             args.tokens, 2 * SLOTS)  # fmt: skip

        workdir = tempfile.mkdtemp(prefix="front-door-")
        door_port = free_port()
        # The door as the router role deploys it, its Lua (the accounting of every answer) included.
        lua = os.path.join(ROOT, "roles", "router", "files", "rayvllm-door.lua")
        cfg, mapping = front_door.haproxy_config(routers, "127.0.0.1:%d" % door_port, workdir + "/models.map",
                                                 metrics_bind="127.0.0.1:%d" % free_port(), lua_path=lua)  # fmt: skip
        with open(workdir + "/models.map", "w") as handle:
            handle.write(mapping)
        with open(workdir + "/haproxy.cfg", "w") as handle:
            handle.write(cfg)
        subprocess.run([args.haproxy, "-c", "-q", "-f", workdir + "/haproxy.cfg"], check=True)  # noqa: S603
        processes.append(start([args.haproxy, "-db", "-f", workdir + "/haproxy.cfg"]))
        door = "http://127.0.0.1:%d" % door_port
        await wait_answers(door, model="tiny-llama")
        rows["haproxy"] = {**await probe(door), **await chat_routing(door, args.seconds, args.tokens, b),
                           **await measure(door, "tiny-llama", args.seconds, args.tokens, 2 * SLOTS)}  # fmt: skip

        igw_port, igw_metrics = free_port(), free_port()
        argv = router_args("power_of_two", igw_port, igw_metrics, [])
        processes.append(start([args.router, *argv[: argv.index("--worker-urls")], "--enable-igw"]))
        igw = "http://127.0.0.1:%d" % igw_port
        deadline = time.monotonic() + 60
        while True:
            try:
                workers = await igw_register(igw, [(default.url, "tiny-llama"), (b.url, "tiny-llama"),
                                                   (b.url.replace("127.0.0.1", "localhost"), "tiny-chat")])  # fmt: skip
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        await wait_answers(igw, model="tiny-llama")
        rows["igw"] = {"workers": workers, **await probe(igw),
                       **await chat_routing(igw, args.seconds, args.tokens, b),
                       **await measure(igw, "tiny-llama", args.seconds, args.tokens, 2 * SLOTS)}  # fmt: skip
    finally:
        for process in processes:
            stop(process)
        for backend in (default, b):
            await backend.stop()
    alone = rows["router alone"]
    capacity = 2 * SLOTS / (args.tokens * TPOT)
    print("backends: default (tiny-llama) and b (tiny-llama, tiny-chat), %d slots x %.0f ms/token each; tiny-llama "
          "capacity %.1f/s" % (SLOTS, TPOT * 1000, capacity))  # fmt: skip
    print("router alone (tiny-llama's port): 1 in flight p50 %.1f ms, p99 %.1f ms; saturation %.1f/s (%d failed)"
          % (alone["p50_ms"], alone["p99_ms"], alone["saturation_rate"], alone["failed"]))  # fmt: skip
    for way in ("haproxy", "igw"):
        row = rows[way]
        row["throughput_vs_router"] = round(row["saturation_rate"] / alone["saturation_rate"], 3)
        print("%s: 1 in flight p50 %.1f ms (+%.1f), p99 %.1f ms (+%.1f); saturation %.1f/s = %.3f of the router "
              "alone (%d failed)" % (way, row["p50_ms"], row["p50_ms"] - alone["p50_ms"], row["p99_ms"],
                                     row["p99_ms"] - alone["p99_ms"], row["saturation_rate"],
                                     row["throughput_vs_router"], row["failed"]))  # fmt: skip
        print("  tiny-chat beside tiny-llama: %d completed, %d at b, %d failed (tiny-llama %d failed)"
              % (row["tiny_chat_completed"], row["tiny_chat_at_b"], row["tiny_chat_failed"],
                 row["tiny_llama_failed"]))  # fmt: skip
        print("  GET /v1/models: %s" % row["models"])
        print("  model 'nope': %d %s" % (row["unknown_status"], row["unknown_body"]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--router", required=True, help="the vllm-router executable")
    parser.add_argument("--haproxy", required=True, help="the haproxy executable")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--json", help="write every figure here")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
