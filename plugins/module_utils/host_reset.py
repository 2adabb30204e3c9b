# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What a reset removes from a host: the units, processes, paths and /dev/shm segments of this collection.

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


def plan(units, processes, paths, segments):
    """The steps, in order (units stopped and disabled, then leftover processes killed, then paths and segments
    removed), and one line per thing that goes. Nothing found: no step, no line (a second run changes nothing)."""
    lines = ["unit %s: stop and disable" % u for u in units]
    lines += ["process %d (%s): kill" % (pid, command[:80]) for pid, command in processes]
    lines += ["%s: remove" % p for p in paths]
    lines += ["/dev/shm segment %s: remove" % s for s in segments]
    return {
        "units": list(units),
        "processes": [pid for pid, _command in processes],
        "paths": list(paths),
        "segments": list(segments),
        "lines": lines,
        "changed": bool(lines),
    }
