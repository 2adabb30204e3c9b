# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
name: host_program
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
short_description: The source of a program this collection installs on hosts
description:
  - The one place that says where the programs the roles install on hosts come from. They are plain Python in the
    collection's C(plugins/module_utils/) (standard library only, unit-tested there, shared with the
    modules that import them), installed under C(/usr/local/lib/rayvllm) or beside the service that runs them.
  - C(vllm_probe.py), the completion probe and state files of C(vllm-watchdog) and C(vllm-router-health), installed
    by the roles C(vllm_watchdog) and C(router); C(vllm_watchdog.py), by C(vllm_watchdog); C(vllm_router_health.py),
    by C(router).
  - Programs that need more than the standard library live in the C(files/) of the one role that installs them
    (C(router)'s C(vllm_router_launch.py), C(ray_serve)'s C(rayvllm_serve_ingress.py)).
  - A name that is not one of these fails, naming the ones there are.
options:
  _terms:
    description: File names of host programs.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: The watchdog program
  ansible.builtin.copy:
    content: "{{ lookup('rayvllm.fleet.host_program', 'vllm_watchdog.py') }}"
    dest: /usr/local/lib/rayvllm/vllm_watchdog.py
    mode: "0755"
"""

RETURN = r"""
_raw:
  description: The content of each program, byte for byte (a trailing newline kept).
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# name: the file in plugins/module_utils/ it is read from.
HOST_PROGRAMS = {
    "vllm_probe.py": "vllm_probe.py",
    "vllm_watchdog.py": "vllm_watchdog.py",
    "vllm_router_health.py": "vllm_router_health.py",
}
HOME = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        contents = []
        for name in terms:
            if name not in HOST_PROGRAMS:
                raise AnsibleLookupError(
                    "rayvllm.fleet.host_program: no host program named '%s' (there are %s)"
                    % (name, ", ".join(sorted(HOST_PROGRAMS)))
                )
            with open(os.path.join(HOME, HOST_PROGRAMS[name]), encoding="utf-8") as handle:
                contents.append(handle.read())
        return contents
