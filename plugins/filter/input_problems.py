# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Each role's input checks as one list of problems (logic in module_utils/checks/inputs/)."""

from ansible.errors import AnsibleFilterError


def input_problems(values, role, host, model=None, context=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import inputs
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.plain_data import plain, plain_on_read

    try:
        # Copied once into plain data: the checks read the values many times; the model's items are copied when first
        # read, as each host's checks read a small part of it (module_utils/checks/plain_data.py).
        return inputs.problems(role, plain(values), host, plain_on_read(model), plain(context))
    except ValueError as exc:
        raise AnsibleFilterError("input_problems: %s" % exc)


class FilterModule:
    def filters(self):
        return {"input_problems": input_problems}
