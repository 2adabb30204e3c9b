"""Serving during upgrades on the sandbox fleet, as a client sees it: a completion every 0.5 s (30 s
timeout) while playbooks/upgrade.yml runs, then the longest gap, the failed requests and the play time,
for the two version pairs of the sandbox (inventories/sandbox/group_vars and
molecule/default/vars/upgrade.yml), starting from the one the fleet runs:
  1. Ray + vLLM: to the other pair (its venvs are staged first unless already there),
  2. vLLM only: back to the first pair's vLLM on the new Ray (a vLLM venv is staged first),
  3. rollback: the previous vLLM venv, still staged, with an argument vLLM rejects.
benchmarks/upgrade.sh converges a fleet first (REUSE=1: the converged one)."""

import json
import sys
import time
from pathlib import Path

import testinfra
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "molecule/default"))
from sandbox import ROOT, SETTINGS, CompletionPoller, playbook, vllm_version  # noqa: E402

PAIRS = [{key: SETTINGS[key] for key in ("ray_version", "vllm_version")},
         yaml.safe_load((ROOT / "molecule/default/vars/upgrade.yml").read_text())]  # fmt: skip


def running():
    head = testinfra.get_host("docker://ray-head")
    return {"ray_version": Path(head.check_output("readlink /opt/ray/current")).name, "vllm_version": vllm_version()}


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
    print(f"{'scenario':<44} {'play':>7} {'longest gap':>12} {'failed/requests':>16}  result  vLLM after")
    for n, (label, extra, should_pass) in enumerate(scenarios, 1):
        started = time.monotonic()
        with CompletionPoller() as poller:
            rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(extra))
        play = time.monotonic() - started
        (ROOT / ".cache" / f"bench-upgrade-{n}.log").write_text(out)
        report = poller.report()
        if (rc == 0) != should_pass:
            print(out[-4000:])
            raise SystemExit(f"{label}: playbook exited {rc}, expected {'success' if should_pass else 'failure'}")
        result = "ok" if rc == 0 else "rolled back" if "ROLLED BACK" in out else "failed"
        print(f"{label:<44} {play:>6.0f}s {report['longest_gap_s']:>11.1f}s "
              f"{report['failed']:>7}/{report['requests']:<8}  {result:<7} {vllm_version()}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
