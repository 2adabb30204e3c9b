"""Issue 13 on the converged sandbox: from the versions it converged at (inventories/sandbox/group_vars) to
the ones in molecule/default/vars/upgrade.yml with playbooks/upgrade.yml, a re-run that changes nothing, a
failing new version rolled back at Ray level, a failing vLLM-only change rolled back without restarting Ray.
The last stage: it leaves the fleet on the new versions (destroyed after it)."""

import json
import os
import re
from pathlib import Path

import pytest
import testinfra
import yaml

from sandbox import (
    NODE_IPS,
    ROOT,
    SETTINGS,
    TIMED,
    CompletionPoller,
    alive_nodes,
    complete,
    playbook,
    task_started,
    unit_started,
    vllm_version,
)

UPGRADE_VARS = "molecule/default/vars/upgrade.yml"
TO = yaml.safe_load((ROOT / UPGRADE_VARS).read_text())
FROM = {key: SETTINGS[key] for key in TO}
RAY_UNITS = {"ray-head": "ray-head", "ray-worker-1": "ray-worker", "ray-worker-2": "ray-worker"}
VLLM_TO = f"{TO['vllm_version']}-ray{TO['ray_version']}"
VLLM_FROM = f"{FROM['vllm_version']}-ray{FROM['ray_version']}"


def node(name):
    return testinfra.get_host("docker://" + name)


def links():
    return {
        name: (Path(node(name).check_output("readlink /opt/ray/current")).name,
               Path(node(name).check_output("readlink /opt/vllm/current")).name)
        for name in NODE_IPS
    }  # fmt: skip


def mapped_venvs(name, root):
    """The venvs under root whose files a running process on the host has mapped (what really runs)."""
    out = node(name).run(f"grep -ho '{root}/[^/ ]*' /proc/[0-9]*/maps 2>/dev/null | sort -u").stdout
    return {Path(line).name for line in out.split()} - {"current"}


def ray_started():
    return {name: unit_started(name, unit) for name, unit in RAY_UNITS.items()}


RECAP = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", re.M)


def keep(name, out):
    """The playbook's output under .cache/ (CI prints where), for a failure to be read after the run."""
    (ROOT / ".cache" / f"stage4-{name}.log").write_text(out)


def recap(out):
    return {host: (int(changed), int(failed)) for host, changed, failed in RECAP.findall(out)}


def test_upgrade_stages_everything_then_switches_ray_and_vllm_in_order():
    assert set(links().values()) == {(FROM["ray_version"], VLLM_FROM)}
    with CompletionPoller() as poller:
        rc, out = playbook("playbooks/upgrade.yml", "-e", f"@{UPGRADE_VARS}", env=TIMED)
    keep("upgrade", out)
    report = poller.report()
    print("Ray + vLLM upgrade, client view:", json.dumps(report))
    assert rc == 0, out[-6000:]
    # The plan names what changes. The old version served until the switch stopped it, after staging ended
    # on every node: the first failed request came after the switch's stop task started.
    assert f"Ray {FROM['ray_version']} -> {TO['ray_version']} on ray-head, ray-worker-1, ray-worker-2" in out
    stop = task_started(out, "Upgrade | stop vLLM")
    assert stop
    assert poller.first_down_at is None or poller.first_down_at >= stop - 1, (poller.first_down_at, stop)
    # Every node runs the new versions, from the new venvs, and serves.
    assert set(links().values()) == {(TO["ray_version"], VLLM_TO)}
    for name in NODE_IPS:
        assert mapped_venvs(name, "/opt/ray") <= {TO["ray_version"]}, name
        assert FROM["ray_version"] not in mapped_venvs(name, "/opt/ray") and VLLM_FROM not in mapped_venvs(
            name, "/opt/vllm"
        )
    assert len(alive_nodes()) == 3
    assert vllm_version() == TO["vllm_version"]
    assert complete() >= 1
    # Pruning keeps the current and the previous venv of each (ray_venvs_keep = vllm_venvs_keep = 0).
    for name in NODE_IPS:
        assert sorted(node(name).check_output("ls /opt/ray").split()) == sorted(
            [FROM["ray_version"], TO["ray_version"], "current"]
        )
        assert sorted(node(name).check_output("ls /opt/vllm").split()) == sorted([VLLM_FROM, VLLM_TO, "current"])


def test_a_second_upgrade_run_changes_nothing_and_restarts_nothing():
    ray_before, vllm_before = ray_started(), unit_started("ray-head", "vllm")
    rc, out = playbook("playbooks/upgrade.yml", "-e", f"@{UPGRADE_VARS}")
    keep("rerun", out)
    assert rc == 0, out[-6000:]
    assert recap(out) and all(changed == 0 for changed, _ in recap(out).values()), recap(out)
    assert "every node runs what was staged; nothing to switch" in out
    assert ray_started() == ray_before and unit_started("ray-head", "vllm") == vllm_before


# Two Ray restarts and three vLLM starts (about 4 minutes): CI keeps under its 60 minutes with the vLLM-level
# rollback below, which proves the same gate and rollback without Ray; run it with RAYVLLM_SLOW_TESTS=1.
@pytest.mark.skipif(
    os.environ.get("RAYVLLM_SLOW_TESTS") != "1", reason="Ray-level rollback: set RAYVLLM_SLOW_TESTS=1 (about 4 min)"
)
def test_a_new_version_that_fails_its_gate_is_rolled_back_and_the_run_fails():
    """Back to the previous pair (still staged: nothing to build) with an argument vLLM rejects: the switch
    restarts Ray on the old version, vLLM fails to start, the rollback restores Ray and vLLM as they were."""
    bad = {**FROM, "vllm_extra_args": SETTINGS["vllm_extra_args"] + ["--no-such-flag"]}
    with CompletionPoller() as poller:
        rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(bad))
    keep("rollback", out)
    print("failed Ray-level switch and rollback, client view:", json.dumps(poller.report()))
    assert rc != 0
    assert "the server exited before it answered /health" in out, out[-6000:]
    assert "ROLLED BACK: cluster default serves again on its previous versions" in out, out[-6000:]
    assert set(links().values()) == {(TO["ray_version"], VLLM_TO)}
    for name in NODE_IPS:
        assert mapped_venvs(name, "/opt/ray") <= {TO["ray_version"]}, name
    assert "--no-such-flag" not in node("ray-head").file("/etc/systemd/system/vllm.service").content_string
    assert len(alive_nodes()) == 3 and vllm_version() == TO["vllm_version"] and complete() >= 1


def test_a_vllm_only_change_that_fails_is_rolled_back_without_restarting_ray():
    ray_before = ray_started()
    bad = {**TO, "vllm_extra_args": SETTINGS["vllm_extra_args"] + ["--no-such-flag"]}
    rc, out = playbook("playbooks/upgrade.yml", "-e", json.dumps(bad))
    keep("vllm-rollback", out)
    assert rc != 0 and "ROLLED BACK" in out, out[-6000:]
    assert "restart the head" not in out
    assert ray_started() == ray_before
    assert "--no-such-flag" not in node("ray-head").file("/etc/systemd/system/vllm.service").content_string
    assert vllm_version() == TO["vllm_version"] and complete() >= 1
