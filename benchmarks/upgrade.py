"""Serving during upgrades on the sandbox fleet, as a client sees it: a completion every 0.5 s while
playbooks/upgrade.yml runs, then the longest gap, the failed requests and the play time, for
  1. a Ray + vLLM upgrade (inventories/sandbox/group_vars -> molecule/default/vars/upgrade.yml),
  2. a vLLM-only upgrade (back to the first vLLM version on the new Ray: a venv is staged first),
  3. a rollback (the previous vLLM venv, still staged, with an argument vLLM rejects).
Needs a fleet converged at the group_vars versions; benchmarks/upgrade.sh makes one."""

import json
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "molecule/default"))
from sandbox import ROOT, SETTINGS, CompletionPoller, playbook, vllm_version  # noqa: E402

TO = yaml.safe_load((ROOT / "molecule/default/vars/upgrade.yml").read_text())
FROM = {key: SETTINGS[key] for key in TO}
SCENARIOS = [
    ("Ray + vLLM upgrade", TO, True),
    ("vLLM-only upgrade", {"ray_version": TO["ray_version"], "vllm_version": FROM["vllm_version"]}, True),
    ("rollback (failed gate)", {**TO, "vllm_extra_args": SETTINGS["vllm_extra_args"] + ["--no-such-flag"]}, False),
]


def main():
    print(f"{'scenario':<24} {'play':>8} {'longest gap':>12} {'failed/requests':>16}  result  vLLM after")
    for label, extra, should_pass in SCENARIOS:
        started = time.monotonic()
        with CompletionPoller() as poller:
            rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(extra))
        play = time.monotonic() - started
        report = poller.report()
        if (rc == 0) != should_pass:
            print(out[-4000:])
            raise SystemExit(f"{label}: playbook exited {rc}, expected {'success' if should_pass else 'failure'}")
        result = "ok" if rc == 0 else "failed"
        print(f"{label:<24} {play:>7.0f}s {report['longest_gap_s']:>11.1f}s "
              f"{report['failed']:>7}/{report['requests']:<8}  {result:<7} {vllm_version()}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
