"""The firewall_ruleset filter: a host's exposure in, the nftables text, ufw plan and firewalld policy out."""

from ansible_collections.rayvllm.fleet.plugins.filter.firewall_ruleset import FilterModule, firewall_ruleset

EXPOSURE = {
    "members": ["10.0.0.2"],
    "services": [{"name": "vLLM API", "ports": [8000], "sources": ["192.0.2.0/24"], "admins": False}],
}


def test_one_call_gives_every_backend_and_the_problems():
    result = firewall_ruleset(EXPOSURE, "h", admin_cidrs=["office"], ssh_ports=[22])
    assert "tcp dport 8000 accept" in result["text"] and "table inet rayvllm_fleet" in result["text"]
    assert any(rule.get("to_port") == "8000" for rule in result["ufw"]["rules"])
    assert '<port port="8000" protocol="tcp"/>' in result["firewalld"]["text"]
    assert 'port="8000"' not in result["firewalld"]["ssh"]
    assert result["problems"] == [
        "firewall_admin_cidrs: 'office' is not an IP address or network; the host firewall needs addresses (set "
        "ansible_host or ray_node_ip to an IP, or give a CIDR such as 10.0.0.0/8)"
    ]


def test_no_exposure_is_a_rule_set_without_openings_but_ssh():
    result = firewall_ruleset(None, "h")
    assert "dport 22 accept" in result["text"] and result["problems"] == []
    assert list(FilterModule().filters()) == ["firewall_ruleset"]
