# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What the roles' input checks share."""

import os
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.spec import UNSET
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import absolute_path
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.systemd_unit import (
    private_tmp_conflicts,
    unsafe_values,
)

DIGITS_RE = re.compile(r"^\d+$")


def text(value):
    """A value as the roles' messages always showed it (Jinja's {{ value }}: Python's str)."""
    return str(value)


def digits(value):
    """Jinja's `value | string is match('^\\d+$')`."""
    return not isinstance(value, bool) and bool(DIGITS_RE.match(str(value)))


def number(value, default=0.0):
    """Jinja's `value | float`: the number, or ``default`` when it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def integer(value, default=0):
    """Jinja's `value | int`."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default


def mapping(value):
    """``value`` when it is a mapping, else an empty one (what the checks iterate over never raises)."""
    return value if isinstance(value, dict) else {}


def unsafe(values, names):
    """["NAME (contains a newline)", ...] for the values of ``names`` written into a unit or environment file."""
    return unsafe_values({name: values.get(name) for name in names})


def not_absolute(values, names, host, optional=()):
    """checks.absolute_path for each of ``names`` (directories and files a role creates, writes and puts in its
    units) that ``values`` holds: a relative one would be created under the task's working directory and written
    into ReadWritePaths= as given. An empty value of one of ``optional`` means "none" and passes."""
    found, fix = [], "Give a path from / (the role's default is right for most fleets: remove the setting)."
    for name in names:
        if name in values and values[name] != UNSET and not (name in optional and values[name] in ("", None)):
            absolute_path(found, name, values[name], "on " + host, what="a path", fix=fix)
    return found


def in_private_tmp(hardening, dirs):
    return private_tmp_conflicts(hardening if isinstance(hardening, dict) else {}, dirs)


def node(model, host):
    nodes = model.get("nodes") if isinstance(model, dict) else None
    found = nodes.get(host) if isinstance(nodes, dict) else None
    return found if isinstance(found, dict) else {}


def cluster(model, host):
    clusters = model.get("clusters") if isinstance(model, dict) else None
    name = node(model, host).get("cluster")
    found = clusters.get(name) if isinstance(clusters, dict) and name is not None else None
    return found if isinstance(found, dict) else {}


def is_sequence(value):
    """Jinja's `is sequence and is not string` (a list, not a mapping)."""
    return isinstance(value, (list, tuple))


def sequence(value):
    """``value`` when it is a list, else an empty one."""
    return list(value) if is_sequence(value) else []


def owned_flags_problem(variable, host, found, role):
    """The message for checks.owned_flags' result (None when empty): every flag, each with what sets it instead."""
    if not found:
        return None
    return (
        "%s on %s sets %s, which the %s role sets itself (the rest of the fleet relies on those values): remove them "
        "from %s and set %s instead."
        % (variable, host, ", ".join(pair[0] for pair in found), role, variable,
           ", ".join(dict.fromkeys(pair[1] for pair in found)))
    )  # fmt: skip


def wheelhouse_source(values, role, host):
    """<role>_wheelhouse_source: a directory of wheels on the controller that the collection brings to the hosts (the
    python_venv role), instead of <role>_wheelhouse_dir, a directory already on every host: one of the two."""
    source, on_host = values.get(role + "_wheelhouse_source"), values.get(role + "_wheelhouse_dir")
    if source in ("", None):
        return []
    if on_host not in ("", None):
        return [
            "%s_wheelhouse_source=%s and %s_wheelhouse_dir=%s are both set on %s: the first is a directory on the "
            "controller that the collection brings to the hosts, the second one already on every host. Set one "
            "of them." % (role, text(source), role, text(on_host), host)
        ]
    path = os.path.expanduser(text(source))
    wheels = [name for name in os.listdir(path) if name.endswith(".whl")] if os.path.isdir(path) else []
    if not wheels:
        what = "a directory without a wheel (*.whl)" if os.path.isdir(path) else "not a directory"
        return [
            "%s_wheelhouse_source=%s on %s is %s on the controller: give a directory of wheels there (pip download "
            "--dest DIR, or pip wheel --wheel-dir DIR, with the uv wheel of python_venv_uv_version beside them), "
            "or remove the setting to install from the index." % (role, text(source), host, what)
        ]
    return []
