# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""vllm-watchdog: restart a vLLM server whose engine hangs.

``/health`` answers 200 while the engine waits forever on a stuck rank (an NCCL hang, a stopped
process, a wedged GPU): only a real completion shows the hang. Each run of ``vllm-watchdog.service``
(started by ``vllm-watchdog.timer``) asks the server for one completion with the API key and a bounded
timeout, and after ``failures`` consecutive failures restarts it, saying why in the journal.

It does not fight anyone:

- a server that is not running (stopped on purpose, or failed: systemd's ``Restart=`` owns that) is
  left alone;
- while a run of this project's playbooks holds it off (a hold file with an expiry, written by the
  upgrade and serve steps), it only reports;
- failures in a server's first ``start_grace`` seconds do not count (loading, compiling), unless it
  has already answered since that start;
- a completion that times out while the server still generates tokens (``vllm:generation_tokens_total``
  rose since the last probe) is a busy server, not a hung one;
- when its restarts do not help (no successful probe since the last one), it waits longer before the
  next: ``backoff`` seconds, doubled each time, at most ``backoff_max``.

This file is both the planning logic (``decide``, unit-tested) and the program the
``vllm_watchdog`` role installs on each head (``python3 vllm_watchdog.py --url ...``), with
``vllm_probe.py`` (the completion probe and state files it shares with vllm-router-health) beside
it; standard library only, Python 3.7+ (``from __future__ import annotations``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from urllib.error import URLError

try:  # installed in /usr/local/lib/rayvllm, with the vllm_probe.py of the same run beside it
    from vllm_probe import completion, load_json, request, save
except ImportError:  # in the collection (unit tests)
    from ansible_collections.rayvllm.fleet.plugins.module_utils.vllm_probe import completion, load_json, request, save

# Journal priorities (systemd reads a "<N>" prefix on a service's output lines).
NOTICE, WARNING, ERROR = "<5>", "<4>", "<3>"

SETTINGS = {
    "failures": 3,
    "start_grace": 300.0,
    "backoff": 300.0,
    "backoff_max": 3600.0,
}

_TOKENS = re.compile(r"^vllm:generation_tokens_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)


def new_state():
    return {"failures": 0, "last_ok": None, "last_restart": None, "unhelpful": 0, "restarts": 0, "tokens": None}


def generation_tokens(metrics_text):
    """Sum of ``vllm:generation_tokens_total`` over its series in a /metrics page; None when absent."""
    values = [float(v) for v in _TOKENS.findall(metrics_text or "")]
    return sum(values) if values else None


def backoff_gap(unhelpful, settings):
    """Seconds to wait after the last restart before another, when ``unhelpful`` restarts did not help."""
    if unhelpful <= 0:
        return 0.0
    return min(float(settings["backoff_max"]), float(settings["backoff"]) * 2 ** (unhelpful - 1))


def hold_reason(hold, now):
    """Why the watchdog is held off (a hold file's {"until": epoch, "by": text}), or None (no hold, expired)."""
    if not hold:
        return None
    try:
        until = float(hold.get("until", 0))
    except (TypeError, ValueError, AttributeError):
        return None
    if until <= now:
        return None
    return "held off by %s for %d s more" % (hold.get("by") or "a playbook run", until - now)


def skip_reason(unit, hold, now):
    """Why not to probe at all this run (None: probe). unit: {"active", "sub", "started"}."""
    if unit.get("active") != "active" or unit.get("sub") != "running":
        return (
            "%s is %s/%s: not the watchdog's to start (a stopped server was stopped on purpose; systemd restarts one "
            "that failed)" % (unit.get("name", "vllm.service"), unit.get("active"), unit.get("sub"))
        )
    return hold_reason(hold, now)


def decide(state, unit, probe, now, settings=None):
    """The next state, the action ("none", "restart" or "wait") and a message, after one probe.

    probe: {"ok": bool, "error": text, "tokens": generation tokens counter now (None: unknown)}.
    unit["started"]: when the running server started (epoch seconds).
    """
    settings = dict(SETTINGS, **(settings or {}))
    state = dict(new_state(), **(state or {}))
    previous_tokens, state["tokens"] = state.get("tokens"), probe.get("tokens")
    started = float(unit.get("started") or 0)
    if probe["ok"]:
        healed = state["failures"] or state["unhelpful"]
        state.update(failures=0, unhelpful=0, last_ok=now)
        return state, "none", ("serving again" if healed else "")
    error = probe.get("error") or "failed"
    progressed = probe.get("tokens") is not None and previous_tokens is not None and probe["tokens"] > previous_tokens
    if progressed:
        state["failures"] = 0
        message = "probe failed (%s) but the server generated %d tokens since the last probe: busy, not hung"
        return state, "none", message % (error, probe["tokens"] - previous_tokens)
    served_since_start = state.get("last_ok") is not None and state["last_ok"] >= started
    age = now - started
    if age < float(settings["start_grace"]) and not served_since_start:
        state["failures"] = 0
        message = "probe failed (%s) %d s after the server started: not counted (start grace %d s)"
        return state, "none", message % (error, age, settings["start_grace"])
    state["failures"] += 1
    limit = int(settings["failures"])
    if state["failures"] < limit:
        message = "probe failed (%s): %d of %d consecutive failures before a restart"
        return state, "none", message % (error, state["failures"], limit)
    gap = backoff_gap(state["unhelpful"], settings)
    if state.get("last_restart") is not None and now - state["last_restart"] < gap:
        message = (
            "probe failed (%s), %d consecutive failures, but the last %d restart(s) did not help: "
            "next restart in %d s (backoff)"
        )
        return (
            state,
            "wait",
            message % (error, state["failures"], state["unhelpful"], gap - (now - state["last_restart"])),
        )
    reason = "%d consecutive completions failed over %d s (last: %s)" % (
        state["failures"],
        now - (state["last_ok"] if state["last_ok"] is not None and state["last_ok"] > started else started),
        error,
    )
    state.update(failures=0, unhelpful=state["unhelpful"] + 1, last_restart=now, restarts=state["restarts"] + 1)
    return state, "restart", reason


# --- the program ------------------------------------------------------------------------------------


def probe_server(url, api_key, model, timeout, prompt="Hello", max_tokens=1):
    """{"ok", "error", "tokens"}: one completion with the key, then the server's token counter."""
    ok, error = completion(url, api_key, model, timeout, prompt, max_tokens)
    result = {"ok": ok, "error": error, "tokens": None}
    try:
        result["tokens"] = generation_tokens(request(url + "/metrics", timeout=5))
    except (URLError, OSError, ValueError):
        pass
    return result


def unit_status(unit):
    """{"name", "active", "sub", "started"} of a systemd unit (started: epoch seconds of its main process)."""
    properties = ["-p", "ActiveState", "-p", "SubState", "-p", "ExecMainStartTimestamp"]
    command = ["systemctl", "show", "--timestamp=unix"] + properties + [unit]
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    started = props.get("ExecMainStartTimestamp", "").lstrip("@")
    return {
        "name": unit,
        "active": props.get("ActiveState", "unknown"),
        "sub": props.get("SubState", "unknown"),
        "started": float(started) if started.replace(".", "", 1).isdigit() else 0.0,
    }


def write_textfile(directory, state, probe_ok, now):
    """Node exporter's textfile collector: the watchdog's restarts and probe state, when the directory exists."""
    if not directory or not os.path.isdir(directory):
        return
    lines = [
        "# HELP vllm_watchdog_restarts_total Restarts of vllm.service by vllm-watchdog.",
        "# TYPE vllm_watchdog_restarts_total counter",
        "vllm_watchdog_restarts_total %d" % state["restarts"],
        "# HELP vllm_watchdog_consecutive_failures Failed completion probes in a row.",
        "# TYPE vllm_watchdog_consecutive_failures gauge",
        "vllm_watchdog_consecutive_failures %d" % state["failures"],
        "# HELP vllm_watchdog_probe_success Whether the last probe completed (1) or not (0).",
        "# TYPE vllm_watchdog_probe_success gauge",
        "vllm_watchdog_probe_success %d" % (1 if probe_ok else 0),
        "# HELP vllm_watchdog_last_run_timestamp_seconds When the watchdog last ran.",
        "# TYPE vllm_watchdog_last_run_timestamp_seconds gauge",
        "vllm_watchdog_last_run_timestamp_seconds %d" % now,
    ]
    save(os.path.join(directory, "vllm_watchdog.prom"), "\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Restart a vLLM server whose engine no longer completes requests.")
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://10.0.0.1:8000")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--unit", default="vllm.service")
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds one completion may take")
    parser.add_argument("--failures", type=int, default=SETTINGS["failures"])
    parser.add_argument("--start-grace", type=float, default=SETTINGS["start_grace"])
    parser.add_argument("--backoff", type=float, default=SETTINGS["backoff"])
    parser.add_argument("--backoff-max", type=float, default=SETTINGS["backoff_max"])
    parser.add_argument("--state", default="/var/lib/vllm-watchdog/state.json")
    parser.add_argument("--hold", default="/run/vllm-watchdog/hold")
    parser.add_argument("--textfile-dir", default="")
    args = parser.parse_args(argv)
    settings = {"failures": args.failures, "start_grace": args.start_grace, "backoff": args.backoff,
                "backoff_max": args.backoff_max}  # fmt: skip
    api_key = os.environ.get("VLLM_API_KEY", "")
    url = args.url.rstrip("/")

    state = dict(new_state(), **load_json(args.state, {}))
    unit = unit_status(args.unit)
    now = time.time()
    skip = skip_reason(unit, load_json(args.hold, None), now)
    if skip:
        state["failures"] = 0
        save(args.state, state)
        write_textfile(args.textfile_dir, state, False, now)
        print(NOTICE + skip if "held off" in skip else skip)
        return 0
    probe = probe_server(url, api_key, args.model, args.timeout)
    now = time.time()
    state, action, message = decide(state, unit, probe, now, settings)
    save(args.state, state)
    write_textfile(args.textfile_dir, state, probe["ok"], now)
    if action == "restart":
        print(WARNING + "restarting %s: %s" % (args.unit, message))
        sys.stdout.flush()
        done = subprocess.run(["systemctl", "restart", "--no-block", args.unit], check=False)
        return 0 if done.returncode == 0 else 1
    if action == "wait":
        print(ERROR + message)
    elif message:
        print((NOTICE if probe["ok"] else WARNING) + message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
