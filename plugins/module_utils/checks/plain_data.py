# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ansible's variables as plain Python data, once, before a filter's checks walk them.

From ansible-core 2.19, the dicts and lists a filter receives are lazy: each item read is templated again, every
time it is read. The input checks read the fleet model and the role's values many times over (each port against
every other service, each value against the role's argument spec), which made the vLLM role's checks take 2.2 s
of the controller's CPU per host instead of 0.05 s (benchmarks/preflight.sh, 8 hosts). One walk that copies them
into dicts, lists and strings reads each item once.

The fleet model is the exception: it describes every host, and each host's checks read their own node, their
cluster and a few shared parts of it. Copied whole on every call, it made each host's checks grow with the fleet
(preflight's controller CPU per host rose from 1.8 s at 8 hosts to 2.3 s at 64, benchmarks/scale.sh). Its top levels
are copied when first read instead (``plain_on_read``).

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


_UNREAD = object()


class PlainOnRead(dict):
    """A dict whose keys are copied at once and each value when first read, as ``plain`` copies it (or, ``depth``
    levels down, again as a ``PlainOnRead``); a value is read from the source at most once. Every way of reading
    it (``[]``, ``get``, ``items``, ``values``, ``pop``, iteration, ``dict(...)``, ``==``) sees the copied values; only
    ``dict``'s own methods called on it unbound (``dict.get(view, key)``) see a value not read yet."""

    __slots__ = ("_source", "_depth")

    def __init__(self, source, depth):
        dict.__init__(self, (((str(key) if isinstance(key, str) else key), _UNREAD) for key in source))
        self._source, self._depth = source, depth

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        if value is _UNREAD:
            value = plain_on_read(self._source[key], self._depth - 1)
            dict.__setitem__(self, key, value)
        return value

    def __iter__(self):  # defined here, so that dict(view) and {**view} read through __getitem__
        return dict.__iter__(self)

    def get(self, key, default=None):
        return self[key] if dict.__contains__(self, key) else default

    def values(self):
        return [self[key] for key in dict.keys(self)]

    def items(self):
        return [(key, self[key]) for key in dict.keys(self)]

    def copy(self):
        return dict(self.items())

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = self[key]
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self):
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        if not dict.__contains__(self, key):
            dict.__setitem__(self, key, default)
        return self[key]

    def __eq__(self, other):
        return dict(self.items()) == other

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return repr(dict(self.items()))

    def __reduce__(self):
        return (dict, (dict(self.items()),))


def plain_on_read(value, depth=2):
    """``plain(value)``, except that the mappings of its first ``depth`` levels are ``PlainOnRead``: their values
    are copied when first read, so that a check that reads a few items of a large mapping copies only those."""
    if depth > 0 and isinstance(value, Mapping):
        return PlainOnRead(value, depth)
    return plain(value)
