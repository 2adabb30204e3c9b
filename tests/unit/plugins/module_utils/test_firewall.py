"""The host firewall's rule set: default deny, cluster members open, each service from its sources only."""

import shutil
import subprocess

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.firewall import (
    firewalld_rules,
    firewalld_state,
    firewalld_xml,
    openings,
    ruleset,
    ufw_added,
    ufw_plan,
    ufw_rules,
)

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
        # A string where a list belongs, as Ansible passes it (a str subclass): named in YAML's words, not Python's.
        ({"admin_cidrs": type("_AnsibleTaggedStr", (str,), {})("10.0.0.0/8")}, "(got a string, '10.0.0.0/8')"),
        ({"extra_rules": {"ports": [9000]}}, "firewall_extra_rules must be a list of rules (got a mapping, {'ports'"),
        ({"ssh_cidrs": ["10.0.0.300/8"]}, "firewall_ssh_cidrs: '10.0.0.300/8'"),
        ({"extra_rules": [{"ports": [80], "proto": "icmp"}]}, "firewall_extra_rules[0]: give ports"),
        (
            {"extra_rules": [{"ports": ["http"], "sources": ["10.0.0.0/8"]}]},
            "firewall_extra_rules[0]: ['http'] are not ports",
        ),
        (
            {"extra_rules": [{"ports": [70000, "9010-9000", 0], "sources": ["10.0.0.0/8"]}]},
            "[70000, '9010-9000', 0] are not ports",
        ),
        (
            {"extra_rules": [{"ports": [9000]}]},
            "firewall_extra_rules[0]: give ports (a list), sources (a list of CIDRs",
        ),
        (
            {"extra_rules": [{"ports": "9000", "sources": ["10.0.0.0/8"]}]},
            "firewall_extra_rules[0]: give ports (a list)",
        ),
        ({"extra_rules": [{"ports": [9000], "sources": "10.0.0.0/8"}]}, "firewall_extra_rules[0]: give ports (a list)"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    assert any(message in p for p in ruleset("h", HEAD_EXPOSURE, **kwargs)[1])


@pytest.mark.skipif(not shutil.which("nft"), reason="nft not installed on this machine")
def test_nft_accepts_the_rule_set(tmp_path):
    text, _problems = ruleset("ray-head", HEAD_EXPOSURE, admin_cidrs=["10.77.0.1/32", "fd00::/64"])
    path = tmp_path / "fw.nft"
    path.write_text(text)
    proc = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode and "Operation not permitted" in proc.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN")
    assert proc.returncode == 0, proc.stderr


# ufw: the same openings as ufw rules, on a host that already runs ufw.
def hexed(text):
    return text.encode().hex()


USER_RULES = "\n".join(
    [
        "*filter",
        "### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in comment=%s" % hexed("operator: ssh"),
        "### tuple ### allow tcp 5555 0.0.0.0/0 any 0.0.0.0/0 in",
        "### tuple ### allow any any 0.0.0.0/0 any 10.77.0.11 in comment=%s" % hexed("rayvllm: Ray cluster members"),
        "### tuple ### allow tcp 9100 0.0.0.0/0 any 10.77.0.10 in comment=%s" % hexed("rayvllm: node exporter"),
        "### tuple ### allow tcp 22 ::/0 any ::/0 in comment=%s" % hexed("operator: ssh"),
        "### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 OpenSSH - in",
        "### tuple ### deny tcp 8000 0.0.0.0/0 any 0.0.0.0/0 in comment=%s" % hexed("rayvllm: not ours, a deny"),
        "-A ufw-user-input -p tcp --dport 22 -j ACCEPT",
    ]
)


def test_ufw_rules_one_per_source_and_port_each_with_our_comment():
    found, problems = openings(
        "ray-head",
        HEAD_EXPOSURE,
        ssh_cidrs=["10.0.0.0/8"],
        extra_rules=[{"ports": ["9000-9010"], "sources": ["0.0.0.0/0", "::/0"]}],
    )
    assert problems == []
    rules = ufw_rules(found)
    assert rules[0] == {
        "rule": "allow",
        "direction": "in",
        "from_ip": "10.0.0.0/8",
        "proto": "tcp",
        "to_port": "22",
        "comment": "rayvllm: SSH: Ansibles connection",
    }
    members = [r for r in rules if r["comment"] == "rayvllm: Ray cluster members: every port"]
    assert [(r["from_ip"], r["proto"], "to_port" in r) for r in members] == [
        ("10.77.0.11", "any", False),
        ("10.77.0.12", "any", False),
    ]
    # Ray head metrics: two ports from one source are two rules; an extra rule from anywhere: IPv4 and IPv6.
    assert [r["to_port"] for r in rules if r["comment"] == "rayvllm: Ray head metrics"] == ["44227", "44217"]
    assert [(r["from_ip"], r["to_port"]) for r in rules if r["comment"] == "rayvllm: firewall_extra_rules[0]"] == [
        ("0.0.0.0/0", "9000:9010"),
        ("::/0", "9000:9010"),
    ]
    # The dashboard only the members reach has no rule of its own.
    assert not [r for r in rules if "dashboard" in r["comment"]]


def test_ufw_rules_we_wrote_before_are_read_back_from_the_tuples():
    assert ufw_added(USER_RULES) == [
        {
            "rule": "allow",
            "direction": "in",
            "from_ip": "10.77.0.11",
            "proto": "any",
            "comment": "rayvllm: Ray cluster members",
        },
        {
            "rule": "allow",
            "direction": "in",
            "from_ip": "10.77.0.10",
            "proto": "tcp",
            "to_port": "9100",
            "comment": "rayvllm: node exporter",
        },
    ]


def test_ufw_plan_removes_only_our_stale_rules_and_never_readds_what_the_operator_allows():
    found, _problems = openings("ray-head", {"members": ["10.77.0.11"]})
    plan = ufw_plan(found, USER_RULES)
    # SSH from anywhere on 22/tcp: the operator's own rule already allows it (adding ours would relabel
    # theirs, and removing ours later would remove their SSH).
    assert [r for r in plan["rules"] if r.get("to_port") == "22"] == []
    assert [r["from_ip"] for r in plan["rules"]] == ["10.77.0.11"]
    # The members' comment changed: adding the rule again relabels it (removing it after would take it);
    # node exporter's rule is no longer wanted.
    assert plan["rules"][0]["comment"] == "rayvllm: Ray cluster members: every port"
    assert [(r["from_ip"], r["comment"], r["delete"]) for r in plan["stale"]] == [
        ("10.77.0.10", "rayvllm: node exporter", True),
    ]


def test_ufw_without_rules_of_ours_nothing_to_remove():
    found, _problems = openings("ray-head", HEAD_EXPOSURE)
    plan = ufw_plan(found, "")
    assert plan["stale"] == [] and plan["rules"] == ufw_rules(found)


def test_ufw_left_to_the_operator_removes_ours_but_the_ssh_rules_that_keep_the_controller_in():
    ssh = "### tuple ### allow tcp 22 0.0.0.0/0 any 192.0.2.7 in comment=%s" % hexed(
        "rayvllm: SSH: Ansibles connection"
    )
    plan = ufw_plan([], USER_RULES + "\n" + ssh)
    assert [r["comment"] for r in plan["disabled"]] == ["rayvllm: Ray cluster members", "rayvllm: node exporter"]
    assert all(r["delete"] for r in plan["disabled"])
    # While enabled, an SSH rule of ours no longer wanted goes like any other.
    assert "rayvllm: SSH: Ansibles connection" in [r["comment"] for r in plan["stale"]]


def test_ufw_one_rule_when_the_ssh_port_and_ansibles_own_port_are_the_same():
    found, _problems = openings("ray-head", {}, ssh_ports=[22, 22], ssh_cidrs=["192.0.2.7"])
    assert [(r["from_ip"], r["to_port"]) for r in ufw_rules(found)] == [("192.0.2.7", "22")]


# firewalld: the same openings as the rich rules of a policy of ours, on a host that already runs firewalld.
def test_firewalld_rich_rules_one_per_source_and_port_anywhere_without_source():
    found, problems = openings(
        "ray-head",
        HEAD_EXPOSURE,
        ssh_cidrs=["0.0.0.0/0", "::/0"],
        extra_rules=[{"ports": ["9000-9010"], "sources": ["0.0.0.0/0", "fd00::/64"], "proto": "udp"}],
    )
    assert problems == []
    rules = firewalld_rules(found)
    assert rules[0] == '<rule><port port="22" protocol="tcp"/><accept/></rule>'
    assert '<rule family="ipv4"><source address="10.77.0.11"/><accept/></rule>' in rules
    assert (
        '<rule family="ipv4"><source address="10.77.0.0/24"/><port port="8000" protocol="tcp"/><accept/></rule>'
        in rules
    )
    assert [r for r in rules if "44217" in r or "44227" in r] == [
        '<rule family="ipv4"><source address="10.77.0.10"/><port port="44227" protocol="tcp"/><accept/></rule>',
        '<rule family="ipv4"><source address="10.77.0.10"/><port port="44217" protocol="tcp"/><accept/></rule>',
    ]
    # An IPv4 wildcard stays IPv4 (no rule without family, which would open IPv6 too).
    assert rules[-2:] == [
        '<rule family="ipv4"><port port="9000-9010" protocol="udp"/><accept/></rule>',
        '<rule family="ipv6"><source address="fd00::/64"/><port port="9000-9010" protocol="udp"/><accept/></rule>',
    ]
    assert not [r for r in rules if "8265" in r]


def test_firewalld_policy_is_well_formed_xml_from_any_zone_to_the_host():
    import xml.etree.ElementTree as ET

    found, _problems = openings(
        "ray-head",
        HEAD_EXPOSURE,
        extra_rules=[{"ports": [7], "sources": ["0.0.0.0/0"], "comment": "a -- <tricky> & comment"}],
    )
    text = firewalld_xml("ray-head", found)
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?>\n')
    policy = ET.fromstring(text.encode())
    assert policy.tag == "policy" and policy.get("target") == "CONTINUE" and int(policy.get("priority")) < 0
    assert [z.get("name") for z in policy.findall("ingress-zone")] == ["ANY"]
    assert [z.get("name") for z in policy.findall("egress-zone")] == ["HOST"]
    assert len(policy.findall("rule")) == len(firewalld_rules(found))
    assert "<!-- Ray dashboard (port 8265): cluster members only -->" in text


FIREWALLD_PROBE = """### runtime
public (default)
  target: default
  interfaces: eth0
  services: dhcpv6-client ssh
  ports: 5555/tcp
  rich rules:
\trule family="ipv4" source address="10.0.0.1" accept
trusted
  target: ACCEPT
  interfaces: docker0
rayvllm-fleet (active)
  rich rules:
\trule family="ipv4" source address="10.77.0.11" accept
### permanent
public
  target: default
  interfaces:
  services: dhcpv6-client ssh
  ports:
  rich rules:
\trule family="ipv4" source address="10.0.0.1" accept
trusted
  target: ACCEPT
  interfaces:
rayvllm-fleet
  rich rules:
### ours
reload
"""


def test_firewalld_changes_made_at_runtime_only_are_named_and_ours_and_interfaces_are_not():
    state = firewalld_state(FIREWALLD_PROBE)
    assert state["reload"] is True
    assert state["runtime_only"] == [
        "public (only at runtime: ports: 5555/tcp, only in the permanent configuration: ports:)"
    ]


def test_firewalld_nothing_pending_and_not_running():
    same = FIREWALLD_PROBE.replace("ports: 5555/tcp", "ports:").replace("reload", "loaded")
    assert firewalld_state(same) == {"reload": False, "runtime_only": []}
    assert firewalld_state("") == {"reload": False, "runtime_only": []}
