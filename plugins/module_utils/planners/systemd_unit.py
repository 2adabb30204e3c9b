# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Values written into systemd units and environment files: one argument stays one argument, and
nothing in a value can add a line (a newline in an ExecStart= value would inject an
``ExecStartPre=+...`` run as root) or be expanded by systemd (``%`` specifiers, ``$VARIABLES``)."""

import re

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
PLAIN_RE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def control_character(value):
    """The first control character of a string as a readable name (e.g. 'a newline'), or None."""
    match = CONTROL_RE.search(str(value))
    if not match:
        return None
    char = match.group(0)
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte"}
    return names.get(char, "the control character %r" % char)


def _one_line(value, what="which a systemd unit cannot hold"):
    """The value as a string ("" for None); ValueError naming its first control character."""
    value = "" if value is None else str(value)
    bad = control_character(value)
    if bad:
        raise ValueError("%r contains %s, %s" % (value, bad, what))
    return value


def _quoted(value):
    """Double-quoted, with \\ and " escaped."""
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


def exec_arg(value):
    """One ExecStart= argument exactly as given: double-quoted (with \\ and " escaped) unless plain,
    % doubled (no specifier expansion) and $ doubled (no variable expansion)."""
    value = _one_line(value, "which a systemd unit cannot hold in one argument")
    if not PLAIN_RE.match(value):
        value = _quoted(value)
    return value.replace("%", "%%").replace("$", "$$")


def path_arg(value):
    """One path of a path-list directive (ReadWritePaths=): quoted when it holds white space or quotes, % doubled
    (systemd expands specifiers there, not $VARIABLES)."""
    value = _one_line(value)
    if not PLAIN_RE.match(value.replace("$", "_")):
        value = _quoted(value)
    return value.replace("%", "%%")


def directive_value(value):
    """A value written as the whole rest of a directive's line (User=, Group=, WorkingDirectory=,
    EnvironmentFile=): as given, % doubled (systemd expands specifiers there, not $VARIABLES)."""
    return _one_line(value).replace("%", "%%")


def _walk(name, value):
    if isinstance(value, dict):
        for key, item in value.items():
            path = "%s.%s" % (name, CONTROL_RE.sub("?", str(key)))
            yield from _walk(path, key)
            yield from _walk(path, item)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk("%s[%d]" % (name, index), item)
    elif isinstance(value, str):
        yield name, value


def unsafe_values(variables):
    """["NAME (contains a newline)", ...] for every string, also inside lists and mappings, of
    {variable name: value} that holds a control character. Values are never repeated (some are secrets)."""
    problems = []
    for name, value in (variables or {}).items():
        for path, text in _walk(str(name), value):
            bad = control_character(text)
            if bad:
                problems.append("%s (contains %s)" % (path, bad))
    return problems


# Properties of `systemctl show` that tell whether a service's main process exited since a start.
EXIT_PROPERTIES = ("ActiveState", "SubState", "NRestarts", "ExecMainStatus", "Result")


def parse_show(text):
    """{property: value} from ``systemctl show -p A -p B ...`` output (KEY=VALUE lines)."""
    shown = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            shown[key.strip()] = value.strip()
    return shown


def exit_reason(unit, before, now):
    """Why ``unit`` is no longer the process that was started, or None while it still is.

    ``before`` and ``now`` are :func:`parse_show` results taken when the wait began and at this
    poll. Systemd counts automatic restarts (``Restart=``) in NRestarts: any increase means the
    started process exited. A unit that is failed, or inactive without a restart pending, has
    exited too.
    """

    def restarts(shown):
        try:
            return int(shown.get("NRestarts", "0") or 0)
        except ValueError:
            return 0

    status = now.get("ExecMainStatus", "")
    detail = "exit status %s, result %s" % (status or "?", now.get("Result", "?") or "?")
    if restarts(now) > restarts(before):
        # The status systemd shows now is the restarted process's: the journal has the exit's.
        return "%s exited and systemd restarted it %d time(s)" % (unit, restarts(now) - restarts(before))
    if now.get("ActiveState") == "failed":
        return "%s failed (%s)" % (unit, detail)
    if now.get("ActiveState") == "inactive":
        return "%s is not running (%s)" % (unit, detail)
    return None


# The systemd sandboxing every service of the fleet starts from, written once: each role's *_systemd_hardening
# default is this plus what its service allows (hardening()). GPU services (Ray, vLLM) keep it as it is: no
# PrivateDevices (it hides /dev/nvidia*, /dev/infiniband) and no MemoryDenyWriteExecute (it breaks CUDA/Triton JIT).
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
}


def hardening(overrides=None):
    """The baseline HARDENING with ``overrides`` ({directive: value}) applied: a new directive is added, an
    existing one replaced, one set to "" dropped when the unit is written (sandboxing())."""
    if overrides is not None and not isinstance(overrides, dict):
        raise ValueError("the sandboxing overrides must be a mapping of systemd directives, got %r" % (overrides,))
    result = dict(HARDENING)
    result.update(overrides or {})
    return result


def sandboxing(hardening, writable=()):  # pylint: disable=redefined-outer-name
    """The lines of a unit's sandboxing: one ``Key=value`` per setting of ``hardening`` ({directive: value},
    sorted; an empty value leaves the directive out, a boolean is yes or no), then, when ``ProtectSystem`` is
    set, ``ReadWritePaths=`` with the ``writable`` paths (each once, in order; empty ones skipped). Every service
    of the fleet writes its sandboxing through this, so they differ only in their settings and writable paths."""
    lines = []
    for key, value in sorted((hardening or {}).items(), key=lambda item: str(item[0])):
        # YAML's unquoted yes/no arrive as booleans: written the way systemd's own documentation does.
        value = ("yes" if value else "no") if isinstance(value, bool) else "" if value is None else str(value)
        if not value:
            continue
        bad = control_character(key) or control_character(value)
        if bad or not re.match(r"^[A-Za-z]+$", str(key)):
            raise ValueError("sandboxing setting %r is not a systemd directive name and value on one line" % key)
        lines.append("%s=%s" % (key, value))
    paths = []
    for path in writable or ():
        if path and path not in paths:
            paths.append(path)
    if str((hardening or {}).get("ProtectSystem") or "") and paths:
        lines.append("ReadWritePaths=%s" % " ".join(path_arg(path) for path in paths))
    return lines


# What systemd reads as "no" for a boolean setting (an empty value: the setting is left out).
FALSE_WORDS = ("", "no", "false", "off", "0")
TMP_RE = re.compile(r"^/(var/)?tmp(/|$)")


def private_tmp_conflicts(hardening, dirs):
    """Names in ``dirs`` ({name: path}) of directories under /tmp or /var/tmp while a unit with the sandboxing
    settings ``hardening`` gets a private /tmp (PrivateTmp true): other units would not see what it puts there."""
    setting = (hardening or {}).get("PrivateTmp")
    if setting is None or str(setting).strip().lower() in FALSE_WORDS:
        return []
    return [name for name, path in dirs.items() if TMP_RE.match(str(path or ""))]
