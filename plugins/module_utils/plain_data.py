# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ansible's variables as plain Python data, once, before a filter's checks walk them.

From ansible-core 2.19, the dicts and lists a filter receives are lazy: each item read is templated again, every
time it is read. The input checks read the fleet model and the role's values many times over (each port against
every other service, each value against the role's argument spec), which made the vLLM role's checks take 2.2 s
of the controller's CPU per host instead of 0.05 s (benchmarks/preflight.sh, 8 hosts). One walk that copies them
into dicts, lists and strings reads each item once.

Plain Python, standard library only.
"""

from collections.abc import Mapping


def plain(value):
    """``value`` with every mapping a dict, every list or tuple a list and every string a str, recursively;
    numbers, booleans, None and other objects as they are."""
    if isinstance(value, Mapping):
        return {(str(key) if isinstance(key, str) else key): plain(item) for key, item in value.items()}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value
