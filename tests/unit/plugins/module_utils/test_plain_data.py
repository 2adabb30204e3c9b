# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
from collections import OrderedDict
from collections.abc import Mapping

from ansible_collections.rayvllm.fleet.plugins.module_utils.plain_data import plain


class Lazy(Mapping):
    """A mapping like ansible-core's lazy containers: counts how often its items are read."""

    def __init__(self, data):
        self.data, self.reads = data, 0

    def __getitem__(self, key):
        self.reads += 1
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


class Tagged(str):
    pass


def exactly(value, cls):
    """Whether ``value`` is a ``cls`` itself, not a subclass (what the copy must give)."""
    return value.__class__ is cls


def test_nested_mappings_lists_and_strings_become_plain_types():
    lazy = Lazy({"nodes": Lazy({"a": [Tagged("x"), (1, 2.5)]}), Tagged("port"): 8000})
    out = plain(lazy)
    assert out == {"nodes": {"a": ["x", [1, 2.5]]}, "port": 8000}
    assert exactly(out, dict) and exactly(out["nodes"], dict)
    assert exactly(out["nodes"]["a"][0], str) and exactly(out["nodes"]["a"][1], list)
    assert all(exactly(key, str) for key in out)


def test_each_item_is_read_once():
    inner = Lazy({"a": 1, "b": 2})
    outer = Lazy({"inner": inner})
    out = plain(outer)
    assert [out["inner"]["a"] for read in range(10)] == [1] * 10
    assert (outer.reads, inner.reads) == (1, 2)


def test_scalars_and_other_objects_stay_as_they_are():
    marker = object()
    assert plain(True) is True and plain(None) is None and plain(3) == 3 and plain(marker) is marker
    assert plain(OrderedDict(b=1, a=2)) == {"b": 1, "a": 2}
    assert plain({1: "one"}) == {1: "one"}
