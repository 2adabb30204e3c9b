"""The host firewall's rule set: default deny, cluster members open, each service from its sources only."""

import shutil
import subprocess

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.firewall import ruleset
from test_fleet_model import build, host

HEAD_EXPOSURE = {
    "members": ["10.77.0.11", "10.77.0.12"],
    "services": [
        {"name": "vLLM API", "ports": [8000], "sources": ["10.77.0.0/24", "10.77.0.10"], "admins": False},
        {"name": "Ray dashboard", "ports": [8265], "sources": [], "admins": True},
        {"name": "Ray head metrics", "ports": [44227, 44217], "sources": ["10.77.0.10"], "admins": False},
    ],
}


def rules(text):
    return [line.strip() for line in text.splitlines() if line.startswith("\t\t")]


def test_default_deny_with_replies_loopback_icmp_and_ssh_first():
    text, problems = ruleset("ray-head", HEAD_EXPOSURE)
    assert problems == []
    lines = rules(text)
    assert lines[0] == "type filter hook input priority filter; policy drop;"
    assert lines[1:4] == ["ct state established,related accept", "ct state invalid drop", 'iif "lo" accept']
    assert lines[5] == 'ip6 saddr fe80::/10 udp sport 547 udp dport 546 accept comment "DHCPv6 replies"'
    assert lines[6] == 'tcp dport 22 accept comment "SSH: Ansible\'s connection"'
    assert lines[-1] == 'counter drop comment "everything else"'
    # The table is replaced atomically, other tables untouched.
    assert "table inet rayvllm_fleet\ndelete table inet rayvllm_fleet\ntable inet rayvllm_fleet {" in text


def test_members_reach_every_port_services_only_their_sources():
    lines = rules(ruleset("ray-head", HEAD_EXPOSURE, admin_cidrs=["192.0.2.0/28"])[0])
    assert 'ip saddr { 10.77.0.11, 10.77.0.12 } accept comment "Ray cluster members: every port"' in lines
    # Overlapping sources are merged (nftables refuses overlapping set elements).
    assert 'ip saddr 10.77.0.0/24 tcp dport 8000 accept comment "vLLM API"' in lines
    assert 'ip saddr 192.0.2.0/28 tcp dport 8265 accept comment "Ray dashboard"' in lines
    assert 'ip saddr 10.77.0.10 tcp dport { 44217, 44227 } accept comment "Ray head metrics"' in lines


def test_an_admin_service_without_admin_networks_stays_closed():
    lines = rules(ruleset("ray-head", HEAD_EXPOSURE)[0])
    assert "# Ray dashboard (port 8265): cluster members only" in lines
    assert not [line for line in lines if "dport 8265" in line]


def test_ipv6_ssh_restriction_and_extra_rules():
    lines = rules(
        ruleset(
            "h",
            {},
            admin_cidrs=[],
            ssh_ports=[2222],
            ssh_cidrs=["10.0.0.0/8", "fd00::/64"],
            extra_rules=[{"ports": ["9000-9010", 8443], "sources": ["2001:db8::1"], "proto": "udp", "comment": "x"}],
        )[0]
    )
    assert 'ip saddr 10.0.0.0/8 tcp dport 2222 accept comment "SSH: Ansible\'s connection"' in lines
    assert 'ip6 saddr fd00::/64 tcp dport 2222 accept comment "SSH: Ansible\'s connection"' in lines
    assert 'ip6 saddr 2001:db8::1 udp dport { 8443, 9000-9010 } accept comment "x"' in lines


def test_an_ipv4_wildcard_does_not_open_ipv6():
    lines = rules(ruleset("h", {}, ssh_cidrs=["0.0.0.0/0", "fd00::/64"])[0])
    assert 'meta nfproto ipv4 tcp dport 22 accept comment "SSH: Ansible\'s connection"' in lines
    assert 'ip6 saddr fd00::/64 tcp dport 22 accept comment "SSH: Ansible\'s connection"' in lines


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"admin_cidrs": ["office"]}, "firewall_admin_cidrs: 'office' is not an IP address or network"),
        ({"ssh_cidrs": ["10.0.0.300/8"]}, "firewall_ssh_cidrs: '10.0.0.300/8'"),
        ({"extra_rules": [{"ports": [80], "proto": "icmp"}]}, "firewall_extra_rules[0]: give ports"),
        ({"extra_rules": [{"ports": ["http"]}]}, "firewall_extra_rules[0]: ['http'] are not ports"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    assert any(message in p for p in ruleset("h", HEAD_EXPOSURE, **kwargs)[1])


def test_fleet_model_exposure_of_a_head_a_worker_and_a_monitoring_host():
    model, problems = build(
        ["h"],
        ["w"],
        {
            "h": host("10.0.0.1", vllm_allowed_cidrs=["192.0.2.0/24"]),
            "w": host("10.0.0.2"),
            "mon": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.9"},
        },
        monitoring=["mon"],
    )
    assert problems == []
    fw = model["firewall"]
    assert fw["h"]["members"] == ["10.0.0.2"] and fw["w"]["members"] == ["10.0.0.1"]
    by_name = {s["name"]: s for s in fw["h"]["services"]}
    assert by_name["vLLM API"]["sources"] == ["10.0.9.9", "192.0.2.0/24"]
    assert by_name["Ray dashboard"] == {"name": "Ray dashboard", "ports": [8265], "sources": [], "admins": True}
    assert by_name["Ray head metrics"]["ports"] == [44217, 44227]
    assert {s["name"] for s in fw["w"]["services"]} == {"node exporter", "Ray metrics", "DCGM exporter"}
    mon = {s["name"]: s for s in fw["mon"]["services"]}
    assert mon["Prometheus"] == {"name": "Prometheus", "ports": [9090], "sources": ["10.0.0.1"], "admins": True}
    # The heads' dashboards query Prometheus and check Grafana's health server-side.
    assert mon["Grafana"] == {"name": "Grafana", "ports": [3000], "sources": ["10.0.0.1"], "admins": True}
    assert fw["mon"]["members"] == []


@pytest.mark.skipif(not shutil.which("nft"), reason="nft not installed on this machine")
def test_nft_accepts_the_rule_set(tmp_path):
    text, _ = ruleset("ray-head", HEAD_EXPOSURE, admin_cidrs=["10.77.0.1/32", "fd00::/64"])
    path = tmp_path / "fw.nft"
    path.write_text(text)
    proc = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True)
    if proc.returncode and "Operation not permitted" in proc.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN")
    assert proc.returncode == 0, proc.stderr
