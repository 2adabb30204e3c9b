# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""A role's directories, files and links on a host, compared and put in place in one pass.

Plain Python (standard library only: the host_files module runs on the managed host). Each function takes one
item as the module's options describe it and returns what differs (an empty list: nothing to do); ``apply_*``
puts it in place. Owners and groups are names (or numeric ids); modes are octal strings such as ``"0640"``.
"""

import grp
import os
import pwd
import stat
import subprocess
import tempfile


class FilesError(Exception):
    """An item cannot be put in place; the message names it."""


def _uid(owner):
    if owner in (None, ""):
        return -1
    if str(owner).isdigit():
        return int(owner)
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise FilesError("no user named %s on this host" % owner) from None


def _gid(group):
    if group in (None, ""):
        return -1
    if str(group).isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise FilesError("no group named %s on this host" % group) from None


def _mode(mode):
    if mode in (None, ""):
        return None
    try:
        value = int(str(mode), 8)
    except ValueError:
        raise FilesError("mode %r is not an octal number such as 0640" % (mode,)) from None
    if not 0 <= value <= 0o7777:
        raise FilesError("mode %r is out of range" % (mode,))
    return value


def attribute_changes(path, item, st=None):
    """Which of owner, group, mode of an existing path differ from the item's (each given ones only)."""
    st = st or os.lstat(path)
    changes = []
    uid, gid, mode = _uid(item.get("owner")), _gid(item.get("group")), _mode(item.get("mode"))
    if uid != -1 and st.st_uid != uid:
        changes.append("owner")
    if gid != -1 and st.st_gid != gid:
        changes.append("group")
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        changes.append("mode")
    return changes


def set_attributes(path, item):
    uid, gid, mode = _uid(item.get("owner")), _gid(item.get("group")), _mode(item.get("mode"))
    if uid != -1 or gid != -1:
        os.chown(path, uid, gid)
    if mode is not None:
        os.chmod(path, mode)


def directory_changes(item):
    path = item["path"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ["created"]
    if not stat.S_ISDIR(st.st_mode):
        raise FilesError("%s exists and is not a directory" % path)
    return attribute_changes(path, item, st)


def apply_directory(item):
    path = item["path"]
    if not os.path.isdir(path):
        os.makedirs(path)
    set_attributes(path, item)


def read_bytes(path):
    """A regular file's bytes; None when there is none."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise FilesError("%s exists and is not a regular file" % path)
    with open(path, "rb") as handle:
        return handle.read()


def file_changes(item):
    """What differs for a file: "content" (or "created"), then attributes."""
    path = item["path"]
    have = read_bytes(path)
    if have is None:
        return ["created"]
    changes = [] if have == item["content"].encode("utf-8") else ["content"]
    return changes + attribute_changes(path, item)


def apply_file(item, changes, run=subprocess.run):
    """Write the content (through a temporary file in the same directory, checked by the item's validate
    command when given, then renamed over the old one: never half written, never unchecked) or fix attributes."""
    path = item["path"]
    if "content" not in changes and "created" not in changes:
        set_attributes(path, item)
        return
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise FilesError("the directory of %s does not exist" % path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(item["content"].encode("utf-8"))
        set_attributes(tmp, item)
        if _mode(item.get("mode")) is None:
            os.chmod(tmp, 0o644 & ~_umask())
        command = item.get("validate")
        if command:
            if "%s" not in command:
                raise FilesError("validate for %s must hold %%s (the file to check)" % path)
            argv = [part.replace("%s", tmp) for part in command.split()]
            done = run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise FilesError(
                    "%s refused the new %s (exit %d): %s; the old file is unchanged"
                    % (argv[0], path, done.returncode, (done.stderr or done.stdout).strip()[-1500:])
                )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def link_changes(item):
    path, src = item["path"], item["src"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ["created"]
    if not stat.S_ISLNK(st.st_mode):
        raise FilesError("%s exists and is not a link: move it away to link it to %s" % (path, src))
    return [] if os.readlink(path) == src else ["target"]


def apply_link(item):
    """Point the link at src, replacing an old link in one rename."""
    path, src = item["path"], item["src"]
    tmp = "%s.rayvllm-new" % path
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(src, tmp)
    os.replace(tmp, path)


def diff_entry(item):
    """Ansible's diff dict for a file whose content changes (the item's diff false: headers only)."""
    path = item["path"]
    before = read_bytes(path)
    if not item.get("diff", True):
        return {"before_header": path, "after_header": path, "before": "", "after": "(content not shown)\n"}
    return {
        "before_header": path,
        "after_header": path,
        "before": before.decode("utf-8", "replace") if before is not None else "",
        "after": item["content"],
    }
