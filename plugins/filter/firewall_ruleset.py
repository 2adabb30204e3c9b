# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall's nftables rule set and ufw rules (see module_utils/firewall.py)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.firewall import openings, ruleset, ufw_plan


def firewall_ruleset(
    exposure,
    host,
    admin_cidrs=(),
    ssh_ports=(22,),
    ssh_cidrs=("0.0.0.0/0", "::/0"),
    extra_rules=(),
    ufw_user_rules="",
):
    args = (host, exposure or {}, admin_cidrs, ssh_ports, ssh_cidrs, extra_rules)
    text, problems = ruleset(*args)
    return {"text": text, "ufw": ufw_plan(openings(*args)[0], ufw_user_rules or ""), "problems": problems}


class FilterModule:
    def filters(self):
        return {"firewall_ruleset": firewall_ruleset}
