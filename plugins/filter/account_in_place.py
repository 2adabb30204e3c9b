# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Whether a service account is already as a role's group/user task would make it (from fleet_accounts)."""


def account_in_place(accounts, user=None, group=None, home=None, shell=None, create_home=False, groups=()):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_facts import account_in_place as _in_place

    return _in_place(
        accounts, user=user, group=group, home=home, shell=shell, create_home=create_home, groups=groups or ()
    )


class FilterModule:
    def filters(self):
        return {"account_in_place": account_in_place}
