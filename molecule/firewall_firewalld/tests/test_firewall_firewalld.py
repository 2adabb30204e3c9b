"""The host firewall on hosts that already run firewalld: the openings become the rich rules of a firewalld
policy of ours (rayvllm-fleet, from any zone to the host), the operator's zones stay as they are, firewalld
reloads only when that policy changed and never over changes the operator made at runtime only; nothing of
nftables beside it; Ansible's own SSH connection stays open whatever the settings say."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scenario_helpers import firewall, host_of, no_nftables_of_ours, over_ssh, reachability, reaches  # noqa: E402

HEAD, WORKER = "fwd-head", "fwd-worker"
WORKER_IP = "10.80.0.11"
POLICY = "/etc/firewalld/policies/rayvllm-fleet.xml"
CONTROLLER_7777 = [{"ports": [7777], "sources": ["10.80.0.1"], "comment": "controller"}]
testinfra_hosts = ["ansible://ray_head"]  # the tests drive both hosts from the controller


def rich_rules(name):
    """The rich rules of our policy as firewalld runs it (not as the file says)."""
    out = host_of(name).run("firewall-cmd --info-policy rayvllm-fleet")
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("\t")] if out.rc == 0 else None


def zone(name, which="public"):
    return host_of(name).check_output("firewall-cmd --info-zone %s" % which)


def reloaded(out, name):
    """Whether the run whose output is OUT reloaded firewalld on host NAME."""
    task = next(part for part in out.split("TASK [") if "Firewall | firewalld reloads" in part.split("]")[0])
    return "changed: [%s]" % name in task


@pytest.fixture
def restored():
    """Whatever a test sets, the next runs start from the default rules again."""
    yield
    rc, out = firewall()
    assert rc == 0, out


def test_the_openings_are_a_firewalld_policy_of_ours_and_the_operators_zone_is_untouched():
    for name, other in ((HEAD, "10.80.0.11"), (WORKER, "10.80.0.10")):
        host = host_of(name)
        assert 'rule family="ipv4" source address="%s" accept' % other in rich_rules(name), rich_rules(name)
        assert 'rule port port="22" protocol="tcp" accept' in rich_rules(name), rich_rules(name)
        public = zone(name)
        assert "services: dhcpv6-client ssh" in public and "ports: 5555/tcp" in public, public
        assert not [line for line in public.splitlines() if line.startswith("\t")], public  # no rich rule added
        # firewalld stays the only firewall.
        assert no_nftables_of_ours(host), name


def test_members_reach_every_port_and_an_outsider_only_what_a_rule_opens():
    # fwd-head is a member of the worker's cluster: every port, 7777 included; the controller is not: the operator's
    # 5555 yes, 7777 (no rule for it) no.
    assert reachability(HEAD, WORKER_IP) == (True, True, False)


def test_a_rule_no_longer_wanted_is_removed_firewalld_reloads_only_on_a_change_the_operators_zone_stays(restored):
    rc, out = firewall("-e", json.dumps({"firewall_extra_rules": CONTROLLER_7777}))
    assert rc == 0, out
    assert 'rule family="ipv4" source address="10.80.0.1" port port="7777" protocol="tcp" accept' in rich_rules(WORKER)
    assert reaches(WORKER_IP, 7777)
    assert reloaded(out, WORKER)
    rc, out = firewall()
    assert rc == 0, out
    assert reloaded(out, WORKER)
    assert not [rule for rule in rich_rules(WORKER) if "7777" in rule]
    assert not reaches(WORKER_IP, 7777)
    assert reaches(WORKER_IP, 5555) and "ports: 5555/tcp" in zone(WORKER)
    # A run that changes nothing does not reload.
    rc, out = firewall()
    assert rc == 0, out
    assert not reloaded(out, WORKER) and not reloaded(out, HEAD)


def test_check_mode_shows_the_change_and_writes_nothing():
    worker = host_of(WORKER)
    before, running = worker.file(POLICY).content_string, rich_rules(WORKER)
    rc, out = firewall("--check", "--diff", "-e", json.dumps({"firewall_extra_rules": CONTROLLER_7777}))
    assert rc == 0, out
    assert (
        '+  <rule family="ipv4"><source address="10.80.0.1"/><port port="7777" protocol="tcp"/><accept/></rule>' in out
    )
    assert worker.file(POLICY).content_string == before and rich_rules(WORKER) == running
    assert not reaches(WORKER_IP, 7777)


def test_a_reload_that_would_drop_runtime_only_changes_is_refused(restored):
    """The operator opened 6666 at runtime only: a policy change (which needs a reload) is refused, naming the
    zone and the fix; a run that needs no reload goes through, and 6666 stays open."""
    worker = host_of(WORKER)
    worker.run_expect([0], "firewall-cmd --zone=public --add-port=6666/tcp")
    try:
        rc, out = firewall("-e", json.dumps({"firewall_extra_rules": CONTROLLER_7777}))
        assert rc != 0
        assert "public (only at runtime: ports: 5555/tcp 6666/tcp" in out, out
        assert "firewall-cmd --runtime-to-permanent" in out
        assert "6666/tcp" in zone(WORKER)
        assert not [rule for rule in rich_rules(WORKER) if "7777" in rule]
        rc, out = firewall()  # the policy file goes back to what runs: no reload needed
        assert rc == 0, out
        assert "6666/tcp" in zone(WORKER)
    finally:
        worker.run_expect([0], "firewall-cmd --zone=public --remove-port=6666/tcp")


def test_a_configuration_firewalld_refuses_is_not_loaded_and_the_previous_policy_stays(restored):
    worker = host_of(WORKER)
    before, running = worker.file(POLICY).content_string, rich_rules(WORKER)
    worker.run_expect(
        [0], 'echo \'<service><port port="1" protocol="nope"/></service>\' > /etc/firewalld/services/broken.xml'
    )
    try:
        rc, out = firewall("-e", json.dumps({"firewall_extra_rules": CONTROLLER_7777}))
        assert rc != 0
        assert "refused its configuration" in out and "the previous one is back" in out, out
        assert worker.file(POLICY).content_string == before and rich_rules(WORKER) == running
        assert worker.run("ls /etc/firewalld/policies").stdout.split() == ["rayvllm-fleet.xml"]
    finally:
        worker.run_expect([0], "rm -f /etc/firewalld/services/broken.xml")


def test_a_zone_that_accepts_everything_is_refused_before_anything_changes():
    worker = host_of(WORKER)
    before = worker.file(POLICY).content_string
    worker.run_expect([0], "firewall-cmd --set-default-zone=trusted")
    try:
        rc, out = firewall("-e", json.dumps({"firewall_extra_rules": CONTROLLER_7777}))
        assert rc != 0
        assert "zone trusted, whose target ACCEPT" in out, out
        assert worker.file(POLICY).content_string == before
    finally:
        worker.run_expect([0], "firewall-cmd --set-default-zone=public")


def test_left_to_the_operator_only_the_ssh_openings_stay(restored):
    rc, out = firewall("-e", "firewall_enabled=false")
    assert rc == 0, out
    for name in (HEAD, WORKER):
        assert rich_rules(name) == ['rule port port="22" protocol="tcp" accept'], rich_rules(name)
        assert "ports: 5555/tcp" in zone(name)
    assert not reaches(WORKER_IP, 7777)


def test_ansibles_own_ssh_connection_stays_open_when_the_ssh_settings_leave_it_out(tmp_path):
    """fwd-worker reached over SSH (as real hosts are) with SSH open only by our policy (the operator took the
    ssh service out of the zone): narrowing firewall_ssh_cidrs to a network the controller is not in would
    shut it out, but the role reads the connection's address and port and keeps them open."""
    worker = host_of(WORKER)
    inventory, ssh_works = over_ssh(tmp_path, HEAD, WORKER, WORKER_IP)

    worker.run_expect([0], "firewall-cmd --permanent --zone=public --remove-service=ssh && firewall-cmd --reload")
    try:
        assert ssh_works()  # our policy opens 22 from anywhere (the default firewall_ssh_cidrs)
        rc, out = firewall("-e", json.dumps({"firewall_ssh_cidrs": ["192.0.2.0/24"]}), inventory=inventory)
        assert rc == 0, out
        ssh_rules = sorted(rule for rule in rich_rules(WORKER) if 'port="22"' in rule)
        assert ssh_rules == [
            'rule family="ipv4" source address="10.80.0.1" port port="22" protocol="tcp" accept',
            'rule family="ipv4" source address="192.0.2.0/24" port port="22" protocol="tcp" accept',
        ], rich_rules(WORKER)
        assert ssh_works(), "a new SSH connection from the controller was refused"
    finally:
        worker.run_expect([0], "firewall-cmd --permanent --zone=public --add-service=ssh && firewall-cmd --reload")
    rc, out = firewall()
    assert rc == 0, out
    assert 'rule port port="22" protocol="tcp" accept' in rich_rules(WORKER)


def test_a_host_that_stops_running_firewalld_gets_the_nftables_table_and_keeps_ansibles_ssh_connection(tmp_path):
    """The nftables path over real SSH: with firewalld stopped on fwd-worker, the role loads its own table
    (policy drop) instead; with firewall_ssh_cidrs narrowed to a network the controller is not in, the
    connection's address keeps SSH open. firewalld started again and a re-run: the policy runs, the table goes."""
    worker = host_of(WORKER)
    inventory, ssh_works = over_ssh(tmp_path, HEAD, WORKER, WORKER_IP)
    worker.run_expect([0], "systemctl stop firewalld")
    try:
        rc, out = firewall("-e", json.dumps({"firewall_ssh_cidrs": ["192.0.2.0/24"]}), inventory=inventory)
        assert rc == 0, out
        table = worker.check_output("nft list table inet rayvllm_fleet")
        assert "policy drop" in table, table
        assert [line for line in table.splitlines() if "dport 22" in line and "10.80.0.1" in line], table
        assert ssh_works(), "a new SSH connection from the controller was refused"
        # The operator's 5555 was a firewalld rule: with firewalld stopped, only the members get in.
        assert reachability(HEAD, WORKER_IP) == (True, False, False)
    finally:
        worker.run_expect([0], "systemctl start firewalld")
    rc, out = firewall()
    assert rc == 0, out
    assert no_nftables_of_ours(worker)
    assert reachability(HEAD, WORKER_IP) == (True, True, False)
