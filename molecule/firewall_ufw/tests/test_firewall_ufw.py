"""The host firewall on hosts that already run ufw: the openings become ufw rules of ours (comment
"rayvllm: ..."), the operator's rules stay, ours go when no longer wanted; nothing of nftables beside it;
Ansible's own SSH connection stays open whatever the settings say."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scenario_helpers import firewall, host_of, no_nftables_of_ours, over_ssh, reachability, reaches  # noqa: E402

HEAD, WORKER = "ufw-head", "ufw-worker"
OPERATORS = ["ufw allow 22/tcp comment 'operator: ssh'", "ufw allow 5555/tcp comment 'operator: agent'"]
WORKER_IP = "10.79.0.11"
testinfra_hosts = ["ansible://ray_head"]  # the tests drive both hosts from the controller


def recap(out, name):
    line = next(line for line in out.splitlines() if line.startswith(name + " ") and "ok=" in line)
    return dict(item.split("=") for item in line.split()[2:])


def rules(name):
    """ufw's own list of the rules it was given (`ufw show added`), one command per line."""
    return host_of(name).check_output("ufw show added").splitlines()[1:]


def ours(name):
    return [rule for rule in rules(name) if "comment 'rayvllm: " in rule]


@pytest.fixture
def restored():
    """Whatever a test sets, the next runs start from the default rules again."""
    yield
    rc, out = firewall()
    assert rc == 0, out


def test_the_openings_are_ufw_rules_of_ours_and_no_nftables_table_beside_ufw():
    for name, other in ((HEAD, "10.79.0.11"), (WORKER, "10.79.0.10")):
        host = host_of(name)
        assert f"ufw allow from {other} comment 'rayvllm: Ray cluster members: every port'" in rules(name), rules(name)
        # The operator's rules are still there, untouched; their SSH rule already opens 22/tcp from
        # anywhere, so no rule of ours repeats it (ufw would relabel theirs as ours).
        assert all(rule in rules(name) for rule in OPERATORS), rules(name)
        assert not [rule for rule in ours(name) if "SSH" in rule], rules(name)
        # The head's operator allowed what no rule allows: now denied; the worker's rejected it: kept.
        status = host.check_output("ufw status verbose")
        assert "Status: active" in status and ("deny" if name == HEAD else "reject") + " (incoming)" in status, status
        # ufw drives iptables-nft: the nftables package the role installs elsewhere is not even needed.
        assert no_nftables_of_ours(host), name


def test_members_reach_every_port_and_an_outsider_only_what_a_rule_opens():
    # ufw-head is a member of the worker's cluster: every port, 7777 included; the controller is not: the operator's
    # 5555 yes, 7777 (no rule for it) no.
    assert reachability(HEAD, WORKER_IP) == (True, True, False)


def test_a_rule_no_longer_wanted_is_removed_and_the_operators_rules_stay(restored):
    extra = [{"ports": [7777], "sources": ["10.79.0.1"], "comment": "controller"}]
    rc, out = firewall("-e", json.dumps({"firewall_extra_rules": extra}))
    assert rc == 0, out
    assert recap(out, WORKER)["changed"] != "0"
    assert "ufw allow from 10.79.0.1 to any port 7777 proto tcp comment 'rayvllm: controller'" in rules(WORKER)
    assert reaches(WORKER_IP, 7777)
    before = ours(WORKER)
    rc, out = firewall()
    assert rc == 0, out
    assert "remove rayvllm: controller: from 10.79.0.1 to port 7777/tcp" in out
    assert ours(WORKER) == [rule for rule in before if "rayvllm: controller" not in rule]
    assert not reaches(WORKER_IP, 7777)
    assert all(rule in rules(WORKER) for rule in OPERATORS) and reaches(WORKER_IP, 5555)


def test_check_mode_shows_the_change_and_writes_nothing():
    before = rules(WORKER)
    extra = [{"ports": [7777], "sources": ["10.79.0.1"], "comment": "controller"}]
    rc, out = firewall("--check", "--diff", "-e", json.dumps({"firewall_extra_rules": extra}))
    assert rc == 0, out
    assert "allow rayvllm: controller: from 10.79.0.1 to port 7777/tcp" in out
    assert rules(WORKER) == before
    assert not reaches(WORKER_IP, 7777)


def test_left_to_the_operator_only_our_rules_go(restored):
    rc, out = firewall("-e", "firewall_enabled=false")
    assert rc == 0, out
    for name in (HEAD, WORKER):
        assert ours(name) == [], rules(name)
        assert rules(name) == OPERATORS
        assert "Status: active" in host_of(name).check_output("ufw status")


def test_ansibles_own_ssh_connection_stays_open_when_the_ssh_settings_leave_it_out(tmp_path):
    """ufw-worker reached over SSH (as real hosts are) with SSH open only by a rule of ours (the operator's gone):
    narrowing firewall_ssh_cidrs to a network the controller is not in removes that rule, but the role reads
    the connection's address and port and keeps them open, added before the old rule goes."""
    worker = host_of(WORKER)
    inventory, ssh_works = over_ssh(tmp_path, HEAD, WORKER, WORKER_IP)

    worker.run_expect([0], "ufw delete allow 22/tcp")
    try:
        # SSH open by our rules only (from anywhere, the default firewall_ssh_cidrs), written over docker exec.
        rc, out = firewall()
        assert rc == 0, out
        assert "ufw allow 22/tcp comment 'rayvllm: SSH: Ansibles connection'" in rules(WORKER), rules(WORKER)
        assert ssh_works()
        rc, out = firewall("-e", json.dumps({"firewall_ssh_cidrs": ["192.0.2.0/24"]}), inventory=inventory)
        assert rc == 0, out
        ssh_rules = [rule for rule in ours(WORKER) if "SSH" in rule]
        assert sorted(ssh_rules) == [
            "ufw allow from 10.79.0.1 to any port 22 proto tcp comment 'rayvllm: SSH: Ansibles connection'",
            "ufw allow from 192.0.2.0/24 to any port 22 proto tcp comment 'rayvllm: SSH: Ansibles connection'",
        ], rules(WORKER)
        assert ssh_works(), "a new SSH connection from the controller was refused"
    finally:
        worker.run_expect([0], "ufw allow 22/tcp comment 'operator: ssh'")
    # Back to the scenario's settings: the operator's rule covers SSH again, so ours go.
    rc, out = firewall()
    assert rc == 0, out
    assert not [rule for rule in ours(WORKER) if "SSH" in rule], rules(WORKER)
