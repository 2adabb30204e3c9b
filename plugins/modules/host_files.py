#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_files
short_description: A role's directories, files and links on a host, in one call
version_added: "0.3.0"
description:
  - Makes sure of every directory in O(directories), every file in O(files) and every link in O(links), in that
    order, in one module call (a role's configuration is often ten files; one call instead of ten is what keeps a
    re-run that changes nothing short).
  - A file's content is written through a temporary file in the same directory, checked by its C(validate) command
    when it has one, then renamed over the old file, so it is never half written nor unchecked. A refused file fails the
    task and leaves the old one in place.
  - Reports C(changed) when anything was (or, in check mode, would be) changed, and which paths in RV(changed_paths),
    so a caller can act on one file's change.
  - The content of a file is sent as a module argument, so give a task whose files hold secrets C(no_log) and their
    items C(diff=false).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  directories:
    description: Directories, created with their parents when missing.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory.
        type: path
        required: true
      owner:
        description: Owner (name or id); unset keeps it.
        type: str
      group:
        description: Group (name or id); unset keeps it.
        type: str
      mode:
        description: Mode as an octal string such as C("0750"); unset keeps it.
        type: str
  files:
    description: Regular files and their whole content.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file; its directory must exist (list it in O(directories) when the role creates it).
        type: path
        required: true
      content:
        description: The file's whole content (text).
        type: str
        required: true
      owner:
        description: Owner (name or id); unset keeps it.
        type: str
      group:
        description: Group (name or id); unset keeps it.
        type: str
      mode:
        description: Mode as an octal string such as C("0640"); unset keeps it (a new file gets 0644 less the umask).
        type: str
      validate:
        description: A command checking the new content before it replaces the file, C(%s) standing for its path.
        type: str
      diff:
        description: Show the content in diff mode; false for secrets (headers only).
        type: bool
        default: true
  links:
    description: Symbolic links.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The link; an existing file or directory there is refused.
        type: path
        required: true
      src:
        description: What the link points at.
        type: str
        required: true
attributes:
  check_mode:
    description: Reports what would change; changes nothing.
    support: full
  diff_mode:
    description: The files whose content changes, before and after.
    support: full
"""

EXAMPLES = r"""
- name: Ray's configuration
  rayvllm.fleet.host_files:
    directories:
      - {path: /etc/ray, owner: root, group: ray, mode: "0750"}
    files:
      - path: /etc/ray/ray.env
        content: "{{ lookup('ansible.builtin.template', 'ray.env.j2') }}"
        owner: root
        group: ray
        mode: "0640"
    links:
      - {path: /opt/ray/current, src: /opt/ray/2.60.0}
  register: ray_files
  notify: Restart ray
"""

RETURN = r"""
changed_paths:
  description: The paths that were (in check mode, would be) created or changed, in order.
  returned: always
  type: list
  elements: str
  sample: ["/etc/ray/ray.env"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_files import (
    FilesError,
    apply_directory,
    apply_file,
    apply_link,
    diff_entry,
    directory_changes,
    file_changes,
    link_changes,
)

_OWNERSHIP = dict(owner=dict(type="str"), group=dict(type="str"), mode=dict(type="str"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(path=dict(type="path", required=True), **_OWNERSHIP),
            ),
            files=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    path=dict(type="path", required=True),
                    content=dict(type="str", required=True),
                    validate=dict(type="str"),
                    diff=dict(type="bool", default=True),
                    **_OWNERSHIP,
                ),
            ),
            links=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(path=dict(type="path", required=True), src=dict(type="str", required=True)),
            ),
        ),
        supports_check_mode=True,
    )
    changed_paths, diffs = [], []
    try:
        for item in module.params["directories"]:
            if directory_changes(item):
                changed_paths.append(item["path"])
                if not module.check_mode:
                    apply_directory(item)
        for item in module.params["files"]:
            changes = file_changes(item)
            if changes:
                changed_paths.append(item["path"])
                if "content" in changes or "created" in changes:
                    diffs.append(diff_entry(item))
                if not module.check_mode:
                    apply_file(item, changes)
        for item in module.params["links"]:
            if link_changes(item):
                changed_paths.append(item["path"])
                if not module.check_mode:
                    apply_link(item)
    except (FilesError, OSError) as exc:
        module.fail_json(msg=str(exc), changed_paths=changed_paths)
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths)
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
