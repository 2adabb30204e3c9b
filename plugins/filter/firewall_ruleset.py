# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall's nftables rule set (see module_utils/firewall.py)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.firewall import ruleset


def firewall_ruleset(exposure, host, admin_cidrs=(), ssh_ports=(22,), ssh_cidrs=("0.0.0.0/0", "::/0"), extra_rules=()):
    text, problems = ruleset(host, exposure or {}, admin_cidrs, ssh_ports, ssh_cidrs, extra_rules)
    return {"text": text, "problems": problems}


class FilterModule:
    def filters(self):
        return {"firewall_ruleset": firewall_ruleset}
