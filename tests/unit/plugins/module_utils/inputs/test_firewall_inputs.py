"""Admin services open to every address only with the explicit opt-in (firewall_admin_open_to_all)."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import firewall as inputs

VALUES = {
    "firewall_enabled": True,
    "firewall_ssh_port": 22,
    "firewall_ssh_cidrs": ["10.0.0.0/8"],
    "firewall_extra_rules": [],
}


def problems(**values):
    return inputs.problems(dict(VALUES, **values), "gpu-1", {"firewall": {}}, {"probe": {"firewalls": []}})


@pytest.mark.parametrize("everyone", [["0.0.0.0/0"], ["::/0"], ["10.0.0.0/8", "0.0.0.0/0", "::/0"], ["0.0.0.0/0 "]])
def test_admin_services_open_to_every_address_are_refused_without_the_opt_in(everyone):
    (problem,) = problems(firewall_admin_cidrs=everyone)
    assert problem.startswith(
        "firewall_admin_cidrs on gpu-1 holds %s, every address"
        % ", ".join(c.strip() for c in everyone if c.strip().endswith("/0"))
    )
    assert "set firewall_admin_open_to_all: true" in problem
    assert problems(firewall_admin_cidrs=everyone, firewall_admin_open_to_all=True) == []


def test_networks_of_the_operators_need_no_opt_in():
    assert problems(firewall_admin_cidrs=["10.0.0.0/8", "192.168.1.7/32", "2001:db8::/32"]) == []
    assert problems(firewall_admin_cidrs=[]) == []
    # With the firewall left to the operator there is nothing this role opens.
    assert problems(firewall_enabled=False, firewall_admin_cidrs=["0.0.0.0/0"]) == []


@pytest.mark.parametrize("port", ["22/tcp", "ssh", 0, 70000, "", None, True])
def test_the_ssh_port_is_a_port_number(port):
    (problem,) = problems(firewall_ssh_port=port, firewall_admin_cidrs=[])
    assert (
        problem
        == "firewall_ssh_port on gpu-1 is '%s': give the port number alone, 1-65535 (e.g. 22; the rule is tcp)." % port
    )
    assert problems(firewall_ssh_port="2222", firewall_admin_cidrs=[]) == []
