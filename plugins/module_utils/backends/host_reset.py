# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What a reset removes from a host: the units, processes, paths, /dev/shm segments and service accounts of this
collection.

Plain Python: unit-tested without a host. ``plan`` turns what was found on the host into the steps to take and
the lines the operator reads (also in check mode); the module ``rayvllm.fleet.host_reset`` finds and acts.
"""

from __future__ import annotations

import fnmatch

# Segments Ray (object store, plasma) and vLLM/torch (shared-memory broadcast and communicators) leave in /dev/shm.
SHM_GLOBS = ("plasma*", "ray_*", "ray-*", "vllm*", "psm_*", "torch_*")


def parse_units(text, patterns):
    """Unit names from ``systemctl list-units --all --plain --no-legend`` or ``list-unit-files`` output (first
    column) that match one of ``patterns`` (shell globs such as ``vllm-router@*.service``)."""
    names = set()
    for line in text.splitlines():
        fields = line.strip().lstrip("\u25cf*").split()
        if not fields:
            continue
        name = fields[0]
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            names.add(name)
    return sorted(names)


def unit_to_stop(state):
    """Whether a unit (``systemctl show --property=LoadState,ActiveState,UnitFileState`` as a dict) needs stopping
    or disabling: it runs, failed, or is enabled."""
    return state.get("ActiveState") in ("active", "activating", "reloading", "deactivating", "failed") or state.get(
        "UnitFileState"
    ) in ("enabled", "enabled-runtime", "linked", "linked-runtime")


def parse_processes(text, patterns, own_pids=()):
    """``[(pid, command)]`` of ``ps -eo pid=,args=`` lines whose command contains one of ``patterns``."""
    found = []
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        pid, command = int(parts[0]), parts[1]
        if pid in own_pids:
            continue
        if any(p in command for p in patterns):
            found.append((pid, command))
    return found


def plan(units, processes, paths, segments, accounts=((), ())):
    """The steps, in order (units stopped and disabled, then leftover processes killed, then paths and segments
    removed, then the service accounts: ``accounts_to_remove``'s steps and lines), and one line per thing that goes.
    Nothing found: no step, no line (a second run changes nothing)."""
    account_steps, account_lines = accounts
    lines = ["unit %s: stop and disable" % u for u in units]
    lines += ["process %d (%s): kill" % (pid, command[:80]) for pid, command in processes]
    lines += ["%s: remove" % p for p in paths]
    lines += ["/dev/shm segment %s: remove" % s for s in segments]
    lines += list(account_lines)
    return {
        "units": list(units),
        "processes": [pid for pid, _command in processes],
        "paths": list(paths),
        "segments": list(segments),
        "accounts": list(account_steps),
        "lines": lines,
        "changed": bool(lines),
    }


def parse_passwd(text):
    """``{name: {"uid", "gid", "home"}}`` of /etc/passwd's text."""
    users = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[2].isdigit() and fields[3].isdigit():
            users[fields[0]] = {"uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5]}
    return users


def parse_group(text):
    """``{name: {"gid", "members"}}`` of /etc/group's text."""
    groups = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[2].isdigit():
            groups[fields[0]] = {"gid": int(fields[2]), "members": [m for m in fields[3].split(",") if m]}
    return groups


def _removed(path, patterns):
    """Whether ``path`` is one of the paths a reset removes (``patterns``: paths or shell globs), or inside one."""
    path = path.rstrip("/")
    return bool(path) and any(
        fnmatch.fnmatchcase(path, p.rstrip("/")) or path.startswith(p.rstrip("/") + "/") for p in patterns
    )


def accounts_to_remove(accounts, users, groups, path_patterns):
    """The service accounts this collection made that a reset removes: ``[("user" or "group", name)]`` in the order
    to remove them, and one line per account for the operator.

    ``accounts``: ``[{"user", "group"}]`` the collection's roles create (host_prep: the account Ray and vLLM run as).
    A user goes only when it is a system account (0 < uid < 1000) whose home is one of the paths the reset removes
    (``path_patterns``): an account of the operator's, with a home of its own, stays. Its group goes when it is a
    system group that no user left keeps as primary group and that has no member but that user.
    """
    steps, lines = [], []
    for account in accounts:
        name, group = account.get("user"), account.get("group")
        user = users.get(name)
        if user and 0 < user["uid"] < 1000 and _removed(user["home"], path_patterns):
            steps.append(("user", name))
            lines.append("account %s (uid %d, home %s): remove" % (name, user["uid"], user["home"]))
        gone = {n for kind, n in steps if kind == "user"}
        entry = groups.get(group)
        if not entry or not 0 < entry["gid"] < 1000 or ("group", group) in steps:
            continue
        # Every user that holds it (as primary group or member) goes, and at least one does.
        holders = {n for n, u in users.items() if u["gid"] == entry["gid"]} | set(entry["members"])
        if not holders or not holders <= gone:
            continue
        steps.append(("group", group))
        lines.append("group %s (gid %d): remove" % (group, entry["gid"]))
    return steps, lines
