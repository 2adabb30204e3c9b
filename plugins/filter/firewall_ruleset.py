# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall's nftables rule set, ufw rules and firewalld policy (see module_utils/planners/firewall.py)."""


def firewall_ruleset(
    exposure,
    host,
    admin_cidrs=(),
    ssh_ports=(22,),
    ssh_cidrs=("0.0.0.0/0", "::/0"),
    extra_rules=(),
    ufw_user_rules="",
    firewalld_probe="",
):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.firewall import (
        SSH_COMMENT,
        firewalld_state,
        firewalld_xml,
        nft_text,
        openings,
        ufw_plan,
    )

    found, problems = openings(host, exposure or {}, admin_cidrs, ssh_ports, ssh_cidrs, extra_rules)
    # ssh: the policy when the firewall is left to the operator (the SSH openings only, which may be all
    # that lets the controller in).
    ssh = [opening for opening in found if opening["comment"] == SSH_COMMENT]
    firewalld = dict(
        firewalld_state(firewalld_probe or ""), text=firewalld_xml(host, found), ssh=firewalld_xml(host, ssh)
    )
    return {
        "text": nft_text(host, found),
        "ufw": ufw_plan(found, ufw_user_rules or ""),
        "firewalld": firewalld,
        "problems": problems,
    }


class FilterModule:
    def filters(self):
        return {"firewall_ruleset": firewall_ruleset}
