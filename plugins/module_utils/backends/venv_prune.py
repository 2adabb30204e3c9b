# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Which versioned venvs under an install root to remove, and which to keep.

Layout (roles ray and vllm): ``<root>/<version>/`` venvs and a ``<root>/current``
link to the one in use. Kept: the current venv, the previous one (the rollback
target), ``keep`` more of the newest, and any venv a running process still uses.
Age is when the venv was installed: the mtime of the marker file the
python_venv role writes after a complete install (a venv without one, e.g. an
install cut short, counts as oldest).
"""

import os
import shutil

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.python_venv import MARKER


def installed_venvs(root):
    """{path: installed_at} for every venv directory directly under root (links such as current skipped)."""
    venvs = {}
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return venvs
    for name in names:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isdir(path):
            continue
        marker = os.path.join(path, MARKER)
        if os.path.exists(marker):
            venvs[path] = os.stat(marker).st_mtime
        elif os.path.exists(os.path.join(path, "pyvenv.cfg")):
            venvs[path] = 0.0
    return venvs


def paths_in_use(paths, proc="/proc"):
    """The paths a running process has files mapped from or names on its command line."""
    prefixes = {path: path.rstrip("/") + "/" for path in paths}
    used = set()
    try:
        pids = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except FileNotFoundError:
        return used
    for pid in pids:
        texts = []
        for name in ("maps", "cmdline"):
            try:
                with open(os.path.join(proc, pid, name), "rb") as handle:
                    texts.append(handle.read().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:  # gone, or not ours to read
                continue
        text = "\n".join(texts)
        used.update(path for path, prefix in prefixes.items() if prefix in text)
    return used


def prune_plan(venvs, current, keep=0, in_use=()):
    """(kept, pruned): newest first, by install time. current is never pruned, nor anything in in_use."""
    if keep < 0:
        raise ValueError("keep must be 0 or more, got %r" % (keep,))
    others = sorted((path for path in venvs if path != current), key=lambda path: (venvs[path], path), reverse=True)
    room = 1 + keep  # the previous venv (rollback target) and `keep` more
    kept = ([current] if current in venvs else []) + others[:room]
    pruned = []
    for path in others[room:]:
        (kept if path in in_use else pruned).append(path)
    return kept, pruned


def link_target(link):
    """The real path a symbolic link points at ('' when link is empty or not a link)."""
    return os.path.realpath(link) if link and os.path.islink(link) else ""


def prune(root, current, keep=0, link="", check_mode=False, proc="/proc"):
    """Apply the plan under root. Besides current and prune_plan's rule, the venv link (``<root>/current`` when
    empty) points at and every venv a running process uses are kept; in check mode nothing is removed. Returns
    {kept, pruned (removed, or would be), in_use, diff (the venvs before and after), error (a message naming
    what could not be removed and the fix, '' when none)}."""
    venvs = installed_venvs(root)
    _kept, candidates = prune_plan(venvs, current, keep)
    linked = os.path.realpath(link or os.path.join(root, "current"))
    in_use = paths_in_use(candidates, proc) | ({linked} & set(candidates))
    kept, pruned = prune_plan(venvs, current, keep, in_use)
    errors = remove(pruned) if pruned and not check_mode else {}
    error = ""
    if errors:
        error = "could not remove %s; remove them by hand or fix their permissions, then re-run" % "; ".join(
            "%s (%s)" % item for item in sorted(errors.items())
        )
    return dict(
        kept=kept,
        pruned=[path for path in pruned if path not in errors],
        in_use=sorted(in_use),
        diff=dict(
            before_header="venvs under %s" % root,
            after_header="venvs under %s" % root,
            before="\n".join(sorted(venvs)) + "\n",
            after="\n".join(sorted(set(venvs) - set(pruned))) + "\n",
        ),
        error=error,
    )


def remove(paths):
    """Remove each path; {path: error} for those that could not be removed (the rest are gone)."""
    errors = {}
    for path in paths:
        try:
            shutil.rmtree(path)
        except OSError as exc:
            errors[path] = exc.strerror or str(exc)
    return errors
