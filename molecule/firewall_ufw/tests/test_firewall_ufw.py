"""The host firewall on hosts that already run ufw: the openings become ufw rules of ours (comment
"rayvllm: ..."), the operator's rules stay, ours go when no longer wanted; nothing of nftables beside it."""

import json
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scenario_helpers import host_of, playbook  # noqa: E402

HEAD, WORKER = "ufw-head", "ufw-worker"
OPERATORS = ["ufw allow 22/tcp comment 'operator: ssh'", "ufw allow 5555/tcp comment 'operator: agent'"]
WORKER_IP = "10.79.0.11"
testinfra_hosts = ["ansible://ray_head"]  # the tests drive both hosts from the controller


def firewall(*extra):
    """ansible-playbook playbooks/firewall.yml on both hosts: (exit status, output)."""
    return playbook("playbooks/firewall.yml", *extra)


def recap(out, name):
    line = next(line for line in out.splitlines() if line.startswith(name + " ") and "ok=" in line)
    return dict(item.split("=") for item in line.split()[2:])


def rules(name):
    """ufw's own list of the rules it was given (`ufw show added`), one command per line."""
    return host_of(name).check_output("ufw show added").splitlines()[1:]


def ours(name):
    return [rule for rule in rules(name) if "comment 'rayvllm: " in rule]


def reaches(port, timeout=3):
    """Whether the controller (10.79.0.1, not a cluster member) opens a TCP connection to the worker's port."""
    try:
        with socket.create_connection((WORKER_IP, port), timeout=timeout):
            return True
    except OSError:
        return False


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
        status = host.check_output("ufw status verbose")
        assert "Status: active" in status and "deny (incoming)" in status, status
        # ufw drives iptables-nft: the nftables package the role installs elsewhere is not even needed.
        assert "rayvllm_fleet" not in host.run("nft list tables 2>/dev/null").stdout, name
        assert not host.file("/etc/rayvllm/firewall.nft").exists, name
        assert not host.file("/etc/systemd/system/rayvllm-firewall.service").exists, name


def test_members_reach_every_port_and_an_outsider_only_what_a_rule_opens():
    # ufw-head is a member of the worker's cluster: every port, 7777 included.
    assert host_of(HEAD).run("curl -sS -m 5 -o /dev/null http://%s:7777/" % WORKER_IP).rc == 0
    # The controller is not: the operator's 5555 yes, 7777 (no rule for it) no.
    assert reaches(5555)
    assert not reaches(7777)


def test_a_rule_no_longer_wanted_is_removed_and_the_operators_rules_stay(restored):
    extra = [{"ports": [7777], "sources": ["10.79.0.1"], "comment": "controller"}]
    rc, out = firewall("-e", json.dumps({"firewall_extra_rules": extra}))
    assert rc == 0, out
    assert recap(out, WORKER)["changed"] != "0"
    assert "ufw allow from 10.79.0.1 to any port 7777 proto tcp comment 'rayvllm: controller'" in rules(WORKER)
    assert reaches(7777)
    before = ours(WORKER)
    rc, out = firewall()
    assert rc == 0, out
    assert "remove rayvllm: controller: from 10.79.0.1 to port 7777/tcp" in out
    assert ours(WORKER) == [rule for rule in before if "rayvllm: controller" not in rule]
    assert not reaches(7777)
    assert all(rule in rules(WORKER) for rule in OPERATORS) and reaches(5555)


def test_check_mode_shows_the_change_and_writes_nothing():
    before = rules(WORKER)
    extra = [{"ports": [7777], "sources": ["10.79.0.1"], "comment": "controller"}]
    rc, out = firewall("--check", "--diff", "-e", json.dumps({"firewall_extra_rules": extra}))
    assert rc == 0, out
    assert "allow rayvllm: controller: from 10.79.0.1 to port 7777/tcp" in out
    assert rules(WORKER) == before
    assert not reaches(7777)


def test_left_to_the_operator_only_our_rules_go(restored):
    rc, out = firewall("-e", "firewall_enabled=false")
    assert rc == 0, out
    for name in (HEAD, WORKER):
        assert ours(name) == [], rules(name)
        assert rules(name) == OPERATORS
        assert "Status: active" in host_of(name).check_output("ufw status")
