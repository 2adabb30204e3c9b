#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: venv_prune
short_description: Remove old versioned venvs, keeping the current, the previous and any in use
version_added: "0.3.0"
description:
  - Looks at the venv directories directly under O(root) (the layout of the C(ray) and C(vllm) roles,
    C(<root>/<version>/) with a C(<root>/current) link) and removes the oldest ones.
  - Kept are O(current), the newest other venv (the previous version, the rollback target), the O(keep) next
    newest, and every venv a running process still uses (files mapped from it, or its path on a command line,
    as C(/proc) shows them).
  - A venv's age is when its install completed (the mtime of the C(.rayvllm-requirements) marker the
    C(python_venv) role writes last); a venv without the marker, such as an install cut short, counts as oldest.
  - Links (such as C(current)) and directories that are not venvs are never touched.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  root:
    description: Directory holding the versioned venvs.
    type: path
    required: true
  current:
    description:
      - The venv in use from now on (the C(current) link's target); never removed. The target C(<root>/current)
        points at, if any, is never removed either.
    type: path
    required: true
  keep:
    description: How many venvs to keep besides O(current) and the previous one.
    type: int
    default: 0
attributes:
  check_mode:
    description: Reports what would be removed, removes nothing.
    support: full
  diff_mode:
    description: The venvs under O(root) before and after.
    support: full
"""

EXAMPLES = r"""
- name: Keep the running Ray venv, the previous one and one more
  rayvllm.fleet.venv_prune:
    root: /opt/ray
    current: /opt/ray/2.60.0
    keep: 1
"""

RETURN = r"""
kept:
  description: Venvs left in place, newest first after O(current).
  returned: always
  type: list
  elements: str
  sample: ["/opt/ray/2.60.0", "/opt/ray/2.59.0"]
pruned:
  description: Venvs removed (in check mode, that would be removed).
  returned: always
  type: list
  elements: str
  sample: ["/opt/ray/2.58.0"]
in_use:
  description: Venvs that would have been removed but a running process uses them.
  returned: always
  type: list
  elements: str
  sample: []
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.venv_prune import (
    prune,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", required=True),
            current=dict(type="path", required=True),
            keep=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    root, keep = module.params["root"].rstrip("/") or "/", module.params["keep"]
    current = os.path.normpath(module.params["current"])
    if keep < 0:
        module.fail_json(msg="keep must be 0 or more, got %d" % keep)

    pruned = prune(root, current, keep, check_mode=module.check_mode)
    result = dict(changed=bool(pruned["pruned"]), kept=pruned["kept"], pruned=pruned["pruned"], in_use=pruned["in_use"])
    if module._diff:
        result["diff"] = pruned["diff"]
    if pruned["error"]:
        module.fail_json(msg=pruned["error"], **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
