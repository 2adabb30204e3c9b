# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""One round of sharing a revision of the weights between the nodes that stage it now (roles/model/tasks/share.yml):
who takes part, who has it, who gets the controller's copy, and whom a node fetches from."""

from ansible.errors import AnsibleFilterError


def _recorded(hosts, hostvars, fact):
    """(host, value of ``fact``) for each of ``hosts`` that has it."""
    for host in hosts:
        found = hostvars[host].get(fact) if host in hostvars else None
        if found:
            yield host, found


def model_share_round(hosts, hostvars, node, fact="__peer_share"):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.model_share import round_plan

    shares = {host: dict(found) for host, found in _recorded(hosts, hostvars, fact)}
    try:
        return round_plan(list(hosts), shares, node)
    except ValueError as exc:
        raise AnsibleFilterError("model_share_round: %s" % exc)


def model_share_needed(hosts, hostvars, fact="__model_complete"):
    """Whether any of ``hosts`` found its revision incomplete (revision.yml's stat of the marker, registered as
    ``fact``): only then does a round of sharing run (a re-run that changes nothing skips it)."""
    for _host, found in _recorded(hosts, hostvars, fact):
        stat = found.get("stat") if hasattr(found, "get") else None
        if stat is not None and not stat.get("exists", True):
            return True
    return False


def model_stage_slots(hosts, hostvars, node, fact="__model_stage"):
    """The fleet's models in one order, and ``node``'s settings for each (``serves`` false where it does not serve
    it): each host recorded as ``fact`` the settings of every model it stages."""
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.model_share import stage_slots

    models = {host: list(found) for host, found in _recorded(hosts, hostvars, fact)}
    return stage_slots(list(hosts), models, node)


class FilterModule:
    def filters(self):
        return {
            "model_share_round": model_share_round,
            "model_share_needed": model_share_needed,
            "model_stage_slots": model_stage_slots,
        }
