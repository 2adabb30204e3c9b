# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""vllm-router-health: keep a router's rotation to the backends that really complete requests.

vllm-router checks its workers with a GET (``/health``), which a vLLM server answers while its
engine hangs. Each run of ``vllm-router-health.service`` (started by its timer every few seconds)
asks every backend of every router on the host for one real completion (with the key, bounded),
and through the router's own API (``/remove_worker``, ``/add_worker``):

- takes a backend out after ``failures`` failed completions in a row, unless it is the last one in
  rotation (a router with no backend serves nobody; the failing one may recover);
- puts it back after ``successes`` completions in a row;
- keeps out a backend a playbook holds out (a hold file: ``{"until": epoch, "by", "reason"}``;
  ``until`` 0 holds until a run removes it, e.g. after a failed upgrade gate).

This file is both the planning logic (``decide``, unit-tested) and the program the ``router`` role
installs (``python3 vllm_router_health.py --config-dir /etc/vllm-router``), with ``vllm_probe.py`` (the
completion probe and state files it shares with vllm-watchdog) beside it; standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from concurrent.futures import ThreadPoolExecutor
from urllib.error import URLError
from urllib.parse import quote

try:  # installed in /usr/local/lib/rayvllm, with the vllm_probe.py of the same run beside it
    from vllm_probe import completion, load_json, request, save
except ImportError:  # in the collection (unit tests)
    from ansible_collections.rayvllm.fleet.plugins.module_utils.vllm_probe import completion, load_json, request, save

NOTICE, WARNING = "<5>", "<4>"
SETTINGS = {"failures": 2, "successes": 2}


def hold_of(hold, now):
    """(held, rollout): whether a hold file keeps a backend out, and whether it is a running rollout's."""
    if not isinstance(hold, dict):
        return False, False
    try:
        until = float(hold.get("until") or 0)
    except (TypeError, ValueError):
        return False, False
    if until == 0:
        return True, False
    return until > now, until > now


def decide(state, backends, in_rotation, probes, holds, now, settings=None):
    """One round for one router.

    backends: [url]; in_rotation: [url] (the router's /list_workers); probes: {url: {"ok", "error"}} (held
    backends are not probed); holds: {url: hold file content or None}. Returns (state, actions, messages):
    actions [("remove"|"add", url, reason)], state {url: {"failures", "successes"}}.
    """
    settings = dict(SETTINGS, **(settings or {}))
    state = {url: dict({"failures": 0, "successes": 0}, **(state or {}).get(url, {})) for url in backends}
    rotation = [u for u in in_rotation if u in backends]
    actions, messages = [], []
    for url in backends:
        held, _rollout = hold_of(holds.get(url), now)
        entry = state[url]
        if held:
            entry.update(failures=0, successes=0)
            if url in rotation:
                hold = holds[url]
                reason = "held out by %s: %s" % (hold.get("by") or "a playbook run", hold.get("reason") or "")
                actions.append(("remove", url, reason.strip(": ")))
                rotation.remove(url)
            continue
        probe = probes.get(url) or {"ok": False, "error": "not probed"}
        if probe["ok"]:
            entry.update(failures=0, successes=entry["successes"] + 1)
            if url not in rotation and entry["successes"] >= int(settings["successes"]):
                actions.append(("add", url, "%d completions in a row" % entry["successes"]))
                rotation.append(url)
            continue
        entry.update(successes=0, failures=entry["failures"] + 1)
        if url not in rotation:
            continue
        if entry["failures"] < int(settings["failures"]):
            messages.append(
                "%s: completion failed (%s), %d of %d"
                % (url, probe.get("error"), entry["failures"], int(settings["failures"]))
            )
        elif len(rotation) == 1:
            messages.append(
                "%s: %d completions failed in a row (last: %s), but it is the last backend in rotation: kept"
                % (url, entry["failures"], probe.get("error"))
            )
        else:
            why = "%d completions failed in a row (last: %s)" % (entry["failures"], probe.get("error"))
            actions.append(("remove", url, why))
            rotation.remove(url)
    return state, actions, messages


# --- the program ------------------------------------------------------------------------------------


def probe(url, api_key, model, timeout):
    """{"ok", "error"}: one 1-token completion straight to a backend."""
    ok, error = completion(url, api_key, model, timeout)
    return {"ok": ok, "error": error}


def read_env(path):
    """KEY=VALUE lines of an environment file (values as written, quotes removed)."""
    out = {}
    try:
        with open(path) as handle:
            for line in handle:
                if "=" in line and not line.lstrip().startswith("#"):
                    key, value = line.rstrip("\n").split("=", 1)
                    value = value.strip()
                    if len(value) >= 2 and value[0] == value[-1] == '"':
                        value = re.sub(r"\\(.)", r"\1", value[1:-1])
                    out[key.strip()] = value
    except OSError:
        pass
    return out


def hold_path(state_dir, instance, cluster):
    return os.path.join(state_dir, "holds", "%s@%s.json" % (instance, cluster))


def metrics(rows):
    """Node exporter textfile lines: rows of (model, cluster, in rotation, rollout hold, consecutive failures)."""
    out = []
    for name, column, meaning in (
        ("vllm_router_backend_in_rotation", 2, "Whether the router sends this backend requests (1) or not (0)."),
        ("vllm_router_backend_rollout", 3, "Whether a running rollout holds this backend out on purpose (1)."),
        ("vllm_router_backend_probe_failures", 4, "Failed completion probes in a row."),
    ):
        out += ["# HELP %s %s" % (name, meaning), "# TYPE %s gauge" % name]
        out += ['%s{model="%s",backend="%s"} %d' % (name, row[0], row[1], row[column]) for row in rows]
    return "\n".join(out) + "\n"


def run_router(config, api_key, state_dir, settings, timeout):
    """One round for one router (its config file's content); returns metric rows."""
    router = config["router_url"].rstrip("/")
    backends = [b["url"].rstrip("/") for b in config["backends"]]
    cluster_of = {b["url"].rstrip("/"): b["cluster"] for b in config["backends"]}
    now = time.time()
    holds = {u: load_json(hold_path(state_dir, config["instance"], cluster_of[u]), None) for u in backends}
    try:
        rotation = [u.rstrip("/") for u in json.loads(request(router + "/list_workers", timeout=5)).get("urls", [])]
    except (URLError, OSError, ValueError) as exc:
        print(WARNING + "router %s (%s) does not answer (%s): nothing to do" % (config["model"], router, exc))
        return []
    todo = [u for u in backends if not hold_of(holds[u], now)[0]]
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        futures = {u: pool.submit(probe, u, api_key, config["model"], timeout) for u in todo}
        results = {u: f.result() for u, f in futures.items()}
    state_file = os.path.join(state_dir, "health-%s.json" % config["instance"])
    state, actions, messages = decide(load_json(state_file, {}), backends, rotation, results, holds, now, settings)
    for action, url, reason in actions:
        try:
            if action == "remove":
                request(router + "/remove_worker?url=" + quote(url, safe=""), "POST", timeout=10)
                rotation = [u for u in rotation if u != url]
            else:
                request(router + "/add_worker?url=" + quote(url, safe=""), "POST", timeout=timeout + 10)
                rotation.append(url)
            done = "out of rotation" if action == "remove" else "back into rotation"
            print(WARNING + "%s: cluster %s (%s) %s: %s" % (config["model"], cluster_of[url], url, done, reason))
        except (URLError, OSError) as exc:
            print(WARNING + "%s: could not %s %s: %s" % (config["model"], action, url, exc))
    for message in messages:
        print(WARNING + "%s: %s" % (config["model"], message))
    save(state_file, state)
    return [
        (config["model"], cluster_of[u], int(u in rotation), int(hold_of(holds[u], now)[1]), state[u]["failures"])
        for u in backends
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Keep each vllm-router's rotation to backends that complete requests.")
    parser.add_argument("--config-dir", default="/etc/vllm-router")
    parser.add_argument("--state-dir", default="/var/lib/vllm-router")
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument("--failures", type=int, default=SETTINGS["failures"])
    parser.add_argument("--successes", type=int, default=SETTINGS["successes"])
    parser.add_argument("--textfile-dir", default="")
    args = parser.parse_args(argv)
    settings = {"failures": args.failures, "successes": args.successes}
    rows = []
    for name in sorted(os.listdir(args.config_dir)):
        if not name.endswith(".json"):
            continue
        config = load_json(os.path.join(args.config_dir, name), None)
        if not config:
            continue
        key = read_env(os.path.join(args.config_dir, config["instance"] + ".env")).get("VLLM_ROUTER_API_KEY", "")
        rows += run_router(config, key, args.state_dir, settings, args.timeout)
    if args.textfile_dir and os.path.isdir(args.textfile_dir):
        save(os.path.join(args.textfile_dir, "vllm_router.prom"), metrics(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
