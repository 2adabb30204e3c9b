#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_reset
short_description: Remove this collection's units, processes, files, shared-memory segments and accounts from a host
version_added: "0.3.0"
description:
  - Stops and disables the systemd units matching O(units) (instances of template units included), kills the
    processes left whose command line contains one of O(processes), removes every path matching O(paths) (files,
    links, whole directories) and the files of C(/dev/shm) matching O(shm), then the service accounts of O(accounts),
    in that order, and reloads systemd when a unit file went.
  - Reports C(changed) only when something was found, so a second run changes nothing. In check mode it changes
    nothing and lists in RV(removed) what would go.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  units:
    description: Unit names or shell globs, for example V(vllm-router@*.service).
    type: list
    elements: str
    default: []
  processes:
    description: Substrings of the command lines of processes to kill (SIGKILL) once the units are stopped.
    type: list
    elements: str
    default: []
  paths:
    description: Absolute paths or shell globs to remove.
    type: list
    elements: path
    default: []
  shm:
    description: Shell globs of file names in C(/dev/shm) to remove.
    type: list
    elements: str
    default: []
  accounts:
    description:
      - Service accounts the collection creates, each a user and its group. A user is removed only when it is a system
        account (uid between 1 and 999) whose home is one of O(paths) or inside one (an account of the operator's,
        with a home of its own, stays); its group when it is a system group that no remaining user has as primary
        group and that has no other member.
    type: list
    elements: dict
    default: []
    suboptions:
      user:
        description: The user's name.
        type: str
        required: true
      group:
        description: Its group's name.
        type: str
        required: true
attributes:
  check_mode:
    description: Lists what would go and changes nothing.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Reset a Ray node
  rayvllm.fleet.host_reset:
    units: [ray-head.service, ray-worker.service]
    processes: ["ray::", raylet]
    paths: [/opt/ray, /var/lib/ray]
    shm: ["plasma*"]
    accounts: [{user: ray, group: ray}]
"""

RETURN = r"""
removed:
  description: One line per unit, process, path, segment or account that went (or would go, in check mode).
  returned: always
  type: list
  elements: str
"""

import glob
import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_reset import (
    accounts_to_remove,
    parse_group,
    parse_passwd,
    parse_processes,
    parse_units,
    plan,
    unit_to_stop,
)


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def _accounts(requested, path_patterns):
    if not requested:
        return [], []
    users, groups = parse_passwd(_read("/etc/passwd")), parse_group(_read("/etc/group"))
    return accounts_to_remove(requested, users, groups, path_patterns)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type="list", elements="str", default=[]),
            processes=dict(type="list", elements="str", default=[]),
            paths=dict(type="list", elements="path", default=[]),
            shm=dict(type="list", elements="str", default=[]),
            accounts=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(user=dict(type="str", required=True), group=dict(type="str", required=True)),
            ),
        ),
        supports_check_mode=True,
    )
    p = module.params
    units = []
    systemctl = module.get_bin_path("systemctl")
    if p["units"] and systemctl:
        found = set()
        for listing in ("list-units", "list-unit-files"):
            rc, out, _err = module.run_command([systemctl, listing, "--all", "--plain", "--no-legend", "--no-pager"])
            if rc == 0:
                found.update(parse_units(out, p["units"]))
        # Only a unit that runs, failed or is enabled needs systemctl; its files go with the paths.
        for unit in sorted(found):
            rc, out, _err = module.run_command(
                [systemctl, "show", unit, "--property=LoadState,ActiveState,UnitFileState"]
            )
            state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
            if unit_to_stop(state):
                units.append(unit)
    processes = []
    if p["processes"]:
        ps = module.get_bin_path("ps")
        if ps:
            rc, out, _err = module.run_command([ps, "-eo", "pid=,args="])
            processes = parse_processes(out, p["processes"], own_pids=(os.getpid(), os.getppid()))
            processes = [(pid, cmd) for pid, cmd in processes if "host_reset" not in cmd and "ansible" not in cmd]
    paths = sorted({path for pattern in p["paths"] for path in glob.glob(pattern) if os.path.lexists(path)})
    segments = sorted(
        {path for pattern in p["shm"] for path in glob.glob(os.path.join("/dev/shm", pattern)) if os.path.lexists(path)}
    )
    steps = plan(units, processes, paths, segments, _accounts(p["accounts"], p["paths"]))
    if module.check_mode or not steps["changed"]:
        module.exit_json(changed=steps["changed"], removed=steps["lines"])

    for unit in steps["units"]:
        module.run_command([systemctl, "stop", unit])
        module.run_command([systemctl, "disable", unit])
    for pid in steps["processes"]:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    if steps["processes"]:
        time.sleep(1)
    for path in steps["paths"] + steps["segments"]:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            module.fail_json(msg="cannot remove %s: %s" % (path, exc), removed=steps["lines"])
    for kind, name in steps["accounts"]:
        # userdel may have removed the group with its user (USERGROUPS_ENAB): only what is still there.
        if kind == "group" and name not in parse_group(_read("/etc/group")):
            continue
        command = module.get_bin_path("userdel" if kind == "user" else "groupdel", required=True)
        rc, _out, err = module.run_command([command, name])
        if rc != 0:
            module.fail_json(msg="cannot remove the %s %s: %s" % (kind, name, err.strip()), removed=steps["lines"])
    if systemctl and steps["units"]:
        module.run_command([systemctl, "daemon-reload"])
        module.run_command([systemctl, "reset-failed"])
    module.exit_json(changed=True, removed=steps["lines"])


if __name__ == "__main__":
    main()
