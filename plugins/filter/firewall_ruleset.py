# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall's nftables rule set and ufw rules (see module_utils/firewall.py)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.firewall import nft_text, openings, ufw_plan


def firewall_ruleset(
    exposure,
    host,
    admin_cidrs=(),
    ssh_ports=(22,),
    ssh_cidrs=("0.0.0.0/0", "::/0"),
    extra_rules=(),
    ufw_user_rules="",
):
    found, problems = openings(host, exposure or {}, admin_cidrs, ssh_ports, ssh_cidrs, extra_rules)
    return {"text": nft_text(host, found), "ufw": ufw_plan(found, ufw_user_rules or ""), "problems": problems}


class FilterModule:
    def filters(self):
        return {"firewall_ruleset": firewall_ruleset}
