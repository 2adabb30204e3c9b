"""A short, bounded load against an OpenAI-compatible /v1/completions endpoint.

    smoke_load.py URL MODEL REQUESTS CONCURRENCY MAX_TOKENS DEADLINE_S   (API key: VLLM_API_KEY of the environment file
    named by $SMOKE_ENV_FILE, vLLM's own, or the whole of a file holding only the key, a ray_serve cluster's; the key
    itself never travels in an argument or the environment)

Standard library only. Prints one JSON object: requests sent/succeeded/failed,
wall time, requests/s, output tokens/s, latency p50/p95/max. Exit 1 if any failed.
"""

import json
import os
import re
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

PROMPTS = ["The quick brown fox", "Once upon a time", "In a distant galaxy", "The weather today is"]


def one(url, model, key, max_tokens, index, deadline):
    body = json.dumps(
        {"model": model, "prompt": PROMPTS[index % len(PROMPTS)], "max_tokens": max_tokens, "temperature": 0}
    ).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    started = time.monotonic()
    if started > deadline:
        return None
    request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=max(1.0, deadline - started)) as response:
            tokens = json.load(response)["usage"]["completion_tokens"]
        return time.monotonic() - started, tokens, None
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return time.monotonic() - started, 0, str(exc)


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def main(url, model, requests, concurrency, max_tokens, deadline_s):
    key = ""
    env_file = os.environ.get("SMOKE_ENV_FILE")
    if env_file:
        with open(env_file) as handle:
            text = handle.read()
        for line in text.splitlines():
            name, _equals, value = line.strip().partition("=")
            if name == "VLLM_API_KEY":
                # env_file filter quoting: "..." with \ " $ ` escaped
                key = re.sub(r"\\(.)", r"\1", value[1:-1] if value.startswith('"') else value)
        lines = text.strip().splitlines()
        # A file holding only the key (a ray_serve cluster's; '=' may end a base64 key), not an environment line:
        # the rule of read_api_key in plugins/module_utils/backends/fleet_status.py (this script runs alone on the
        # host).
        env_line = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=[\"']|[A-Z_][A-Z0-9_]*=)")
        if not key and len(lines) == 1 and not env_line.match(lines[0].strip()):
            key = lines[0].strip()
    start = time.monotonic()
    deadline = start + float(deadline_s)
    with ThreadPoolExecutor(int(concurrency)) as pool:
        results = list(pool.map(lambda i: one(url, model, key, int(max_tokens), i, deadline), range(int(requests))))
    wall = time.monotonic() - start
    done = [r for r in results if r is not None]
    ok = [r for r in done if r[2] is None]
    errors = sorted({r[2] for r in done if r[2] is not None})
    latencies = [r[0] for r in ok]
    tokens = sum(r[1] for r in ok)
    report = {
        "url": url,
        "model": model,
        "requests": int(requests),
        "sent": len(done),
        "succeeded": len(ok),
        "failed": len(done) - len(ok),
        "skipped_after_deadline": len(results) - len(done),
        "concurrency": int(concurrency),
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(ok) / wall, 3) if wall else None,
        "output_tokens_per_s": round(tokens / wall, 2) if wall else None,
        "latency_p50_s": percentile(latencies, 0.50),
        "latency_p95_s": percentile(latencies, 0.95),
        "latency_max_s": round(max(latencies), 3) if latencies else None,
        "errors": errors[:5],
    }
    print(json.dumps(report))
    return 1 if report["failed"] or not ok else 0


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
