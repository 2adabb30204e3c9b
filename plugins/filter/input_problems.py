# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Each role's input checks as one list of problems (logic in module_utils/inputs/)."""

from ansible.errors import AnsibleFilterError


def input_problems(values, role, host, model=None, context=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils import inputs

    try:
        return inputs.problems(role, values, host, model, context)
    except ValueError as exc:
        raise AnsibleFilterError("input_problems: %s" % exc)


class FilterModule:
    def filters(self):
        return {"input_problems": input_problems}
