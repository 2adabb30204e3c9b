"""playbooks/status.yml on the converged, healthy sandbox: exit 0, nothing changed, also under --check; one
table per cluster; JSON for scripts. Preflight names a live Ray node the inventory lost (issue 29)."""

import json
import re

import pytest
from sandbox import NODE_IPS, playbook, sandbox_inventory


def recap_changed(out):
    return [int(n) for n in re.findall(r"changed=(\d+)", out)]


def test_status_on_the_healthy_fleet_passes_and_changes_nothing():
    rc, out = playbook("playbooks/status.yml")
    assert rc == 0, out[-3000:]
    assert recap_changed(out) and set(recap_changed(out)) == {0}, out[-2000:]
    for cluster in ("default", "b"):
        assert f"cluster {cluster}: OK" in out
    assert re.search(r"nodes alive\s+3/3", out) and re.search(r"GPUs\s+6/6", out)
    assert re.search(r"tiny-llama: \d+ token\(s\) in [\d.]+ s", out)
    assert "in on ray-head" in out


def status_json(*extra):
    """The report playbooks/status.yml prints with status_format=json (the run must pass)."""
    rc, out = playbook(
        "playbooks/status.yml", "-e", "status_format=json", *extra,
        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"},
    )  # fmt: skip
    assert rc == 0, out[-3000:]
    result = json.loads(out[out.index("{") :])
    msgs = [
        host["msg"]
        for play in result["plays"]
        for task in play["tasks"]
        if task["task"]["name"].endswith("Status | JSON")
        for host in task["hosts"].values()
        if "msg" in host
    ]
    assert msgs, out[-3000:]
    return json.loads(msgs[0])


def without_timings(value):
    """The report less what differs from one reading to the next: each completion's seconds."""
    if isinstance(value, dict):
        return {k: None if k == "seconds" else without_timings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


@pytest.fixture(scope="module")
def normal_report():
    """The JSON report of a normal run (read once for the tests below)."""
    return status_json()


def test_status_under_check_mode_reads_the_same(normal_report):
    """--check changes nothing and reports what the normal run reports (each probe really runs under --check: a
    probe skipped in check mode would leave its cluster 'not reached' here)."""
    rc, out = playbook("playbooks/status.yml", "--check")
    assert rc == 0, out[-3000:]
    assert set(recap_changed(out)) == {0}
    assert "cluster default: OK" in out and "cluster b: OK" in out
    checked = status_json("--check")
    assert without_timings(checked) == without_timings(normal_report)
    assert checked["clusters"]["default"]["serving"]["tokens"] > 0 and checked["clusters"]["b"]["alive"] == 1


def test_status_json_for_scripts(normal_report):
    assert normal_report["ok"] and normal_report["problems"] == []
    assert normal_report["clusters"]["default"]["alive"] == 3
    assert normal_report["clusters"]["b"]["serving"]["tokens"] > 0


def test_preflight_names_a_live_node_the_inventory_lost():
    """ray-worker-2 taken out of the inventory while its Ray runs: preflight fails naming its address and the fix,
    instead of the run firewalling it off and dropping it from Prometheus in silence."""
    inventory = sandbox_inventory("without-ray-worker-2", drop_hosts=["ray-worker-2"])
    rc, out = playbook("playbooks/preflight.yml", inventory=inventory)
    text = " ".join(out.split())
    ip = NODE_IPS["ray-worker-2"]
    assert rc != 0, out[-3000:]
    assert (
        f"{ip} is a live member of cluster default's Ray (ALIVE in the node list of its head ray-head, 2 GPUs), "
        "but no host of the inventory has that address." in text
    ), out[-3000:]
    assert "run playbooks/remove_node.yml -e remove_nodes=<it>" in text
    assert recap_changed(out) and set(recap_changed(out)) == {0}, out[-2000:]
