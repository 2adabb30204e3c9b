"""Serving during upgrades on the sandbox fleet, as a client sees it: a completion every 0.5 s (30 s
timeout) straight to each cluster's vLLM server while playbooks/upgrade.yml runs, then per cluster the
longest gap, the failed requests, how long the cluster's last vLLM start took (unit start to
"Application startup complete" in its journal) and the gap beyond that start, plus the play time, for
the two version pairs of the sandbox (inventories/sandbox/group_vars and molecule/default/vars/upgrade.yml),
starting from the one the fleet runs:
  1. Ray + vLLM: to the other pair (its venvs are staged first unless already there),
  2. vLLM only: back to the first pair's vLLM on the new Ray (a vLLM venv is staged first),
  3. rollback: the previous vLLM venv, still staged, with an argument vLLM rejects. The first cluster
     switched fails its gate and is rolled back; the rollout stops, so the clusters after it keep serving.
benchmarks/upgrade.sh converges a fleet first (REUSE=1: the converged one)."""

import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import testinfra
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "molecule/default"))
from sandbox import CLUSTER_HEADS, CLUSTER_URLS, ROOT, SETTINGS, CompletionPoller, playbook, vllm_version  # noqa: E402

PAIRS = [{key: SETTINGS[key] for key in ("ray_version", "vllm_version")},
         yaml.safe_load((ROOT / "molecule/default/vars/upgrade.yml").read_text())]  # fmt: skip


def running():
    head = testinfra.get_host("docker://ray-head")
    ray = Path(head.check_output("readlink /opt/ray/current")).name
    return {"ray_version": ray, "vllm_version": vllm_version()}


def vllm_start_s(cluster, since):
    """Seconds the cluster's last vLLM start took, if it started after ``since`` (epoch): from the unit's
    start to uvicorn's "Application startup complete" in the journal; None if it did not start again."""
    host = testinfra.get_host("docker://" + CLUSTER_HEADS[cluster])
    out = host.check_output(
        'started=$(date -d "$(systemctl show -p ExecMainStartTimestamp --value vllm)" +%s.%N); '
        "echo $started; journalctl -u vllm -o short-unix --since @${started%.*}"
        " | grep -m1 'Application startup complete' || true"
    ).split()
    started = float(out[0])
    if started < since or len(out) < 2:
        return None
    return float(out[1]) - started


def main():
    now = running()
    start, other = (PAIRS[0], PAIRS[1]) if now == PAIRS[0] else (PAIRS[1], PAIRS[0])
    print(f"fleet runs Ray {now['ray_version']} / vLLM {now['vllm_version']}")
    scenarios = [
        (f"Ray {start['ray_version']}->{other['ray_version']} + vLLM {start['vllm_version']}->{other['vllm_version']}",
         other, True),
        (f"vLLM only {other['vllm_version']}->{start['vllm_version']}",
         {"ray_version": other["ray_version"], "vllm_version": start["vllm_version"]}, True),
        ("rollback (vLLM rejects an argument)",
         {**other, "vllm_extra_args": SETTINGS["vllm_extra_args"] + ["--no-such-flag"]}, False),
    ]  # fmt: skip
    print(f"{'scenario':<44} {'play':>6} {'result':<11} {'cluster':<8} {'longest gap':>11} {'failed/requests':>15} "
          f"{'vLLM start':>10} {'gap - start':>11}  vLLM after")  # fmt: skip
    for n, (label, extra, should_pass) in enumerate(scenarios, 1):
        began, started = time.time(), time.monotonic()
        with ExitStack() as stack:
            # Every 0.5 s, as in the rows measured before the stages' client went to 1 s.
            pollers = {
                c: stack.enter_context(CompletionPoller(url=url, interval=0.5)) for c, url in CLUSTER_URLS.items()
            }
            rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(extra))
        play = time.monotonic() - started
        (ROOT / ".cache" / f"bench-upgrade-{n}.log").write_text(out)
        if (rc == 0) != should_pass:
            print(out[-4000:])
            raise SystemExit(f"{label}: playbook exited {rc}, expected {'success' if should_pass else 'failure'}")
        result = "ok" if rc == 0 else "rolled back" if "ROLLED BACK" in out else "failed"
        for cluster, poller in pollers.items():
            report, took = poller.report(), vllm_start_s(cluster, began)
            gap = report["longest_gap_s"]
            start_cols = "%9.1fs %10.1fs" % (took, gap - took) if took else "%10s %11s" % ("-", "-")
            print(f"{label:<44} {play:>5.0f}s {result:<11} {cluster:<8} {gap:>10.1f}s "
                  f"{report['failed']:>6}/{report['requests']:<8} {start_cols}  {vllm_version(cluster)}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
