# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
name: role_inputs
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
short_description: A role's inputs, as its argument spec names them, with the values the host sees
description:
  - The variables a role's input checks receive (C(rayvllm.fleet.input_problems)), read from the role's own
    C(meta/argument_specs.yml) - every option of its main entry point, so that an option added to the spec is checked
    in preflight without a second list to keep (a typo such as C(vllm_serving_mode=ray_servee) in an option a hand
    list left out passed preflight once).
  - Left out are the options that are not inventory settings (a probe result a caller passes in, a secret checked
    where it is used, the parameters of an entry point the playbooks call), listed with why in
    C(plugins/module_utils/checks/inputs/spec.py) (C(NOT_INPUTS)).
  - Each value is the variable as the host sees it (role defaults, inventory, extra vars), templated. One that is
    not set, or whose value names a variable that is not (a default such as C("{{ model_path }}.revisions") without
    C(model_path)), is C(<unset>), and the role's checks say which must be set.
options:
  _terms:
    description: The role's name (one).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: VLLM | refuse unusable inputs
  ansible.builtin.fail:
    msg: "{{ __vllm_problems | join(' | ') }}"
  when: __vllm_problems | length > 0
  vars:
    __vllm_problems: >-
      {{ lookup('rayvllm.fleet.role_inputs', 'vllm') | rayvllm.fleet.input_problems('vllm', inventory_hostname) }}
"""

RETURN = r"""
_raw:
  description: "One mapping, C({option: value}), for the role."
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError, AnsibleUndefinedVariable
from ansible.plugins.lookup import LookupBase

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.spec import UNSET, input_names


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1:
            raise AnsibleLookupError("role_inputs takes one role's name, got %d terms" % len(terms))
        role = str(terms[0])
        names = input_names(role)
        if not names:
            raise AnsibleLookupError("role_inputs: the role %r has no options in its meta/argument_specs.yml" % role)
        variables = variables or {}
        values = {}
        for name in names:
            if name not in variables:
                values[name] = UNSET
                continue
            try:
                values[name] = self._templar.template(variables[name])
            except AnsibleUndefinedVariable:
                values[name] = UNSET
        return [values]
