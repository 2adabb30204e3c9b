# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""systemd EnvironmentFile= lines from a mapping, every value quoted and escaped."""

import re

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_line(key, value):
    """KEY="value" as systemd reads it back: backslash, double quote, dollar and backtick escaped."""
    key = str(key)
    if not NAME_RE.match(key):
        raise ValueError(
            "%r is not an environment variable name (letters, digits and _, not starting with a digit)" % key
        )
    if value is None:
        value = ""
    elif isinstance(value, bool):
        value = "1" if value else "0"
    value = str(value)
    if "\n" in value or "\r" in value:
        raise ValueError("the value of %s spans lines; an environment file holds one line per variable" % key)
    for char in ("\\", '"', "$", "`"):
        value = value.replace(char, "\\" + char)
    return '%s="%s"' % (key, value)


def env_file(variables):
    """One KEY="value" line per item of an ordered mapping or a list of (key, value) pairs."""
    items = variables.items() if hasattr(variables, "items") else variables
    return "".join(env_line(k, v) + "\n" for k, v in items)
