# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Typed checks of inventory values, shared by the fleet model and the roles' input checks.

Each check takes the list of problems it adds to, the variable's name, its value and where it is set ("on
node-a", "of cluster 'beta'"). It returns the usable value (an int for a port, a list for a list, ...) or None,
and for an unusable value appends one message that names the variable, where, the value and the fix. A check
never raises, whatever the value's type: an inventory may hold anything, and the operator must read a message,
not a Python error. A string is never taken for a list (it would be read character by character).

Plain Python, standard library only.
"""

import ipaddress
import posixpath
import re

# Directories a role must never move, link or remove: the system's own and the usual parents of the venvs and
# data (inputs/model.py refuses model_path there).
SYSTEM_DIRS = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/sbin",
    "/usr/share",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/tmp",
    # The usual parents of many models' weights.
    "/srv/models",
    "/data",
    "/models",
)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


def shown(value, limit=80):
    """A value as a message shows it: strings quoted, control characters escaped, long values cut."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        try:
            text = repr(value)
        except Exception:  # pylint: disable=broad-except  # an object whose repr fails is still reported
            text = "<%s>" % type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind(value):
    """What a value is, in the inventory's words (YAML's)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a %s" % type(value).__name__


def whole(value):
    """An int (not a boolean), or a string of digits (YAML leaves a quoted number a string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.isdigit() and value.isascii()


def truthy(value):
    """What Ansible's bool filter reads as true."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")
    return bool(value) and value is not None


def _add(problems, name, where, value, what, fix):
    problems.append("%s %s is %s: %s. %s" % (name, where, shown(value), what, fix))


def port(problems, name, value, where, fix="Set it to a free port from 1 to 65535"):
    """A TCP/UDP port number (1-65535)."""
    if not whole(value) or not 0 < int(value) < 65536:
        _add(problems, name, where, value, "not a port number (a whole number from 1 to 65535)", fix + ".")
        return None
    return int(value)


def count(problems, name, value, where, minimum=0, what="a whole number", fix=None):
    """A whole number of at least ``minimum``."""
    if not whole(value) or int(value) < minimum:
        _add(
            problems, name, where, value, "not %s of at least %d" % (what, minimum),
            fix or "Set it to a whole number of at least %d." % minimum,
        )  # fmt: skip
        return None
    return int(value)


def optional_count(problems, name, value, where, minimum=0, fix=None):
    """null (auto) or a whole number of at least ``minimum``."""
    if value is None:
        return None
    return count(problems, name, value, where, minimum, "null or a whole number", fix)


def string(problems, name, value, where, empty=True, fix=None):
    """A string (empty allowed unless ``empty`` is false)."""
    if not isinstance(value, str) or (not empty and not value.strip()):
        _add(
            problems, name, where, value, "not a string" if not isinstance(value, str) else "empty",
            fix or "Set it to a non-empty string.",
        )  # fmt: skip
        return None
    return value


def one_of(problems, name, value, where, choices):
    if not isinstance(value, str) or value not in choices:
        _add(problems, name, where, value, "not one of %s" % ", ".join(choices), "Use one of them.")
        return None
    return value


def version(problems, name, value, where, example):
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not VERSION_RE.match(str(value)):
        _add(
            problems, name, where, value, "not an exact X.Y.Z release",
            'Pin it in the inventory, e.g. %s: "%s".' % (name, example),
        )  # fmt: skip
        return None
    return str(value)


def string_list(problems, name, value, where, example="[a, b]"):
    """A list of strings; a string alone is refused (it would be read character by character)."""
    if not isinstance(value, (list, tuple)) or any(not isinstance(item, str) for item in value):
        what = "a string, not a list" if isinstance(value, str) else "not a list of strings (%s)" % kind(value)
        if isinstance(value, (list, tuple)):
            bad = [item for item in value if not isinstance(item, str)]
            what = "a list holding %s (%s), not only strings" % (kind(bad[0]), shown(bad[0], 40))
        _add(problems, name, where, value, what, "Write it as a YAML list of strings, e.g. %s: %s." % (name, example))
        return None
    return list(value)


def mapping(problems, name, value, where, example="{KEY: value}"):
    if not isinstance(value, dict):
        _add(problems, name, where, value, "%s, not a mapping" % kind(value), "Write it as %s: %s." % (name, example))
        return None
    return value


def environment(problems, name, value, where):
    """A mapping of environment variable names to scalar values."""
    value = mapping(problems, name, value, where, "{NAME: value}")
    if value is None:
        return None
    for key, item in value.items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            _add(
                problems, "%s key" % name, where, key, "not an environment variable name",
                "Use letters, digits and _ (not starting with a digit).",
            )  # fmt: skip
        elif isinstance(item, (dict, list, tuple)) or item is None:
            _add(
                problems, "%s.%s" % (name, key), where, item, "%s, not a string or number" % kind(item),
                "Give it a plain value.",
            )  # fmt: skip
    return value


def ip_address(problems, name, value, where, fix="Set it to an IP address of the host"):
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        _add(problems, name, where, value, "not an IP address", fix + ".")
        return None


def networks(problems, name, value, where, example="[10.0.0.0/8]"):
    """A list of IP networks (an address is a network of one): [ipaddress networks]; None when unusable."""
    items = string_list(problems, name, value, where, example)
    if items is None:
        return None
    result = []
    for item in items:
        try:
            result.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            _add(
                problems, name, where, value, "%s is not an IP address or network" % shown(item),
                "Give addresses or CIDRs, e.g. %s: %s." % (name, example),
            )  # fmt: skip
            return None
    return result


def every_address(nets):
    """The networks of ``nets`` that hold every address (0.0.0.0/0, ::/0)."""
    return [str(net) for net in nets if net.prefixlen == 0]


def split_listen(value):
    """(host, port) of a HOST:PORT listen address ([v6]:PORT, :PORT), or None."""
    if not isinstance(value, str):
        return None
    host, sep, text = value.strip().rpartition(":")
    if not sep or not whole(text) or not 0 < int(text) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(text)


def listen_address(problems, name, value, where, example="0.0.0.0:9090"):
    """HOST:PORT: (host, port) or None."""
    found = split_listen(value)
    if found is None:
        _add(
            problems, name, where, value, "not HOST:PORT with a port from 1 to 65535",
            "Write it as %s: \"%s\"." % (name, example),
        )  # fmt: skip
    return found


def normal_path(value):
    """The path as the host resolves it: '..' and '.' applied, repeated and trailing slashes gone."""
    path = posixpath.normpath(value)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def absolute_path(problems, name, value, where, what="a directory", fix=None):
    """An absolute path written in its normal form (no '..', '.', '//' or trailing '/'); None otherwise."""
    if not isinstance(value, str) or not value.startswith("/"):
        _add(
            problems,
            name,
            where,
            value,
            "not an absolute path",
            fix or "Set it to %s such as /srv/models/llama." % what,
        )
        return None
    normal = normal_path(value)
    if normal != value:
        _add(
            problems, name, where, value, "not written as the path it resolves to (%s)" % normal,
            "Write it without '..', '.', repeated or trailing slashes: %s: %s." % (name, normal),
        )  # fmt: skip
        return None
    return value


def system_dir(path, protected=()):
    """Why a role must not move, link or remove ``path`` (a normal absolute path), or None."""
    if path in SYSTEM_DIRS:
        return "a system directory"
    for other in protected:
        other = normal_path(str(other)) if isinstance(other, str) and other.startswith("/") else None
        if other and (other == path or other.startswith(path.rstrip("/") + "/")):
            return "%s or a parent of it" % other
    return None


def flag_values(args, flags):
    """{flag: value} of the ``flags`` (long options, e.g. "--tool-call-parser") found in ``args`` (a passthrough list
    such as vllm_extra_args): the value as --flag=value or as the next argument, True for a flag given alone; _ for -
    matches too. Anything that is not a list of strings gives {} (its own check names it)."""
    found = {}
    items = list(args) if isinstance(args, (list, tuple)) else []
    for index, arg in enumerate(items):
        if not isinstance(arg, str) or not arg.startswith("--"):
            continue
        flag, sep, value = arg.partition("=")
        normal = "--" + flag.lstrip("-").replace("_", "-")
        if normal not in flags:
            continue
        if not sep:
            following = items[index + 1] if index + 1 < len(items) else None
            value = following if isinstance(following, str) and not following.startswith("-") else True
        found[normal] = value
    return found


def owned_flags(args, owned):
    """[(flag as written, what sets it instead)] of the flags among ``args`` (a passthrough list such as
    vllm_extra_args) that a role sets itself: ``owned`` is {flag: what sets it instead}. A flag matches as given, as
    --flag=value, with _ for - and, for a flag owned as a prefix (ending in '-'), any flag starting with it; values
    are never looked at."""
    found = []
    for arg in args if isinstance(args, (list, tuple)) else []:
        if not isinstance(arg, str) or not arg.startswith("-"):
            continue
        flag = arg.split("=", 1)[0]
        normal = "--" + flag.lstrip("-").replace("_", "-") if flag.startswith("--") else flag
        for own, instead in owned.items():
            if normal == own or (own.endswith("-") and normal.startswith(own)):
                found.append((flag, instead))
                break
    return found
