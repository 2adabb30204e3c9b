# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
import copy
import json
from collections import OrderedDict
from collections.abc import Mapping

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.plain_data import PlainOnRead, plain, plain_on_read


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


def fleet(count):
    nodes = {
        Tagged("node-%02d" % i): Lazy({"cluster": "c", "settings": Lazy({"port": 8000 + i})}) for i in range(count)
    }
    return Lazy({"nodes": Lazy(nodes), "clusters": Lazy({"c": Lazy({"head": "node-00"})})})


def test_plain_on_read_copies_only_what_is_read_and_each_item_once():
    model = fleet(50)
    out = plain_on_read(model)
    assert [out["nodes"]["node-07"]["settings"]["port"] for read in range(3)] == [8007] * 3
    assert [out.get("clusters").get("c") for read in range(3)] == [{"head": "node-00"}] * 3
    assert model.reads == 2 and model.data["nodes"].reads == 1
    assert [node.reads for node in model.data["nodes"].data.values()].count(0) == 49
    assert exactly(out["nodes"]["node-07"], dict) and exactly(out["nodes"]["node-07"]["settings"], dict)
    assert all(exactly(key, str) for key in out["nodes"])


def test_plain_on_read_is_read_the_same_every_way_a_dict_is():
    out = plain_on_read(fleet(3))
    whole = {"nodes": {"node-%02d" % i: {"cluster": "c", "settings": {"port": 8000 + i}} for i in range(3)},
             "clusters": {"c": {"head": "node-00"}}}  # fmt: skip
    assert isinstance(out, dict) and isinstance(out["nodes"], PlainOnRead)
    assert out == whole and whole == out and not out != whole
    assert dict(out) == whole and {**out["nodes"]} == whole["nodes"] and out.copy() == whole
    assert dict(out.items()) == whole and list(out.values()) == list(whole.values())
    assert json.loads(json.dumps(out)) == whole and copy.deepcopy(out) == whole
    assert sorted(out["nodes"]) == ["node-00", "node-01", "node-02"] and len(out["nodes"]) == 3
    assert "node-01" in out["nodes"] and out["nodes"].get("node-09", "none") == "none"
    assert repr(out["clusters"]) == repr({"c": {"head": "node-00"}})
    nodes = plain_on_read(fleet(3))["nodes"]
    assert nodes.pop("node-00") == whole["nodes"]["node-00"] and nodes.pop("node-09", None) is None
    assert nodes.popitem() == ("node-02", whole["nodes"]["node-02"])
    assert nodes.setdefault("node-01") == whole["nodes"]["node-01"] and nodes.setdefault("new", 1) == 1


def test_plain_on_read_of_anything_but_a_mapping_is_plain():
    assert plain_on_read([Lazy({"a": 1})]) == [{"a": 1}] and exactly(plain_on_read([Lazy({"a": 1})])[0], dict)
    assert plain_on_read(None) is None and plain_on_read(Tagged("x")).__class__ is str
    assert exactly(plain_on_read(Lazy({"a": Lazy({"b": 1})}), depth=1)["a"], dict)
