"""Weights spread between peers (plugins/module_utils/backends/model_share.py): the chain plan, and real HTTP transfers
between threads of this process on the loopback, each node on a port of its own."""

import json
import os
import socket
import threading
import time

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import model_share
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.model_share import (
    Fetcher,
    RateLimit,
    ShareError,
    Shelf,
    build_manifest,
    downstream,
    plan,
    serve,
    stage_identity,
    stage_slots,
    wait_for_downstream,
)

TOKEN = "run-token"


def test_one_seed_makes_one_chain_each_node_fetching_from_the_one_before_it():
    sources = plan(["a", "b", "c", "d"], {"a"})
    assert sources == {"b": ["a"], "c": ["b", "a"], "d": ["c", "b", "a"]}
    assert downstream(sources, "a") == ["b", "c", "d"] and downstream(sources, "d") == []


def test_several_complete_nodes_each_head_a_chain_and_back_each_other_up():
    # A node joining a fleet that has the weights on two nodes: the needy ones dealt round-robin.
    sources = plan(["a", "b", "new1", "new2", "new3"], {"a", "b"})
    assert sources == {"new1": ["a", "b"], "new2": ["b", "a"], "new3": ["new1", "a", "b"]}


def test_nothing_to_fetch_when_every_node_has_it_and_no_seed_is_refused():
    assert plan(["a", "b"], {"a", "b"}) == {}
    with pytest.raises(ValueError, match="the seed must receive it from the controller first"):
        plan(["a", "b"], set())


LLAMA = {"model_path": "/srv/models/tiny-llama", "model_source": "controller", "model_controller_path": "/c/llama"}
CHAT = {"model_path": "/srv/models/tiny-chat", "model_source": "controller", "model_controller_path": "/c/chat/"}


def test_a_model_two_clusters_serve_is_one_slot_with_each_nodes_own_settings():
    # default's nodes serve tiny-llama (vllm_serve), b's head serves tiny-chat and tiny-llama at another path
    # (ray_serve): two slots on every host, tiny-llama in one round for all three nodes.
    b_llama = {**LLAMA, "model_path": "/srv/b/llama", "model_controller_path": "/c/llama/"}
    models = {"head": [LLAMA], "worker": [LLAMA], "b": [CHAT, b_llama]}
    hosts = ["head", "b", "worker"]
    head, b, worker = (stage_slots(hosts, models, node) for node in hosts)
    assert len(head) == len(b) == len(worker) == 2
    assert head[0]["model_path"] == worker[0]["model_path"] == "/srv/models/tiny-llama"
    assert head[1] == worker[1] == {"serves": False, "model": "controller:/c/chat"}
    assert b[0]["model_path"] == "/srv/b/llama" and b[1]["model_path"] == "/srv/models/tiny-chat"
    # The same name for a slot on every host (the model role's loop label: one include for all of them).
    names = ["controller:/c/llama", "controller:/c/chat"]
    assert [slot["model"] for slot in head] == [slot["model"] for slot in b] == names
    assert all(slot["serves"] for slot in b)
    # What an entry leaves out takes the model role's default.
    assert b[1]["model_hf_allow_unpinned"] is False and b[1]["model_size_gib"] == 0
    # A host that recorded nothing stages nothing, in as many slots.
    assert [slot["serves"] for slot in stage_slots(hosts, models, "new")] == [False, False]


def test_models_are_the_same_bytes_by_source_not_by_path():
    hub = {"model_source": "hf", "model_hf_repo": "org/m", "model_hf_revision": "a" * 40, "model_path": "/x"}
    assert stage_identity(hub) == stage_identity({**hub, "model_path": "/y"})
    assert stage_identity(hub) != stage_identity({**hub, "model_hf_revision": "b" * 40})
    assert stage_identity(LLAMA) == stage_identity({**LLAMA, "model_controller_path": "/c/llama/"})
    assert stage_identity(LLAMA) != stage_identity(CHAT)
    shared = {"model_source": "shared", "model_path": "/nfs/m"}
    assert stage_identity(shared) != stage_identity({**shared, "model_path": "/nfs/n"})
    # A model without a source is the role's default source, the hub.
    assert stage_identity({"model_hf_repo": "org/m", "model_hf_revision": "a" * 40}) == stage_identity(hub)


def test_the_rate_limit_holds_the_average_after_a_second_of_credit():
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limit = RateLimit(100, clock=lambda: now[0], sleep=sleep)
    for _second in range(5):
        limit.take(100)  # 5 seconds' worth at once
    assert sum(slept) == pytest.approx(4.0)  # the first second's credit, then the average
    unlimited = RateLimit(0, clock=lambda: now[0], sleep=sleep)
    unlimited.take(10**9)
    assert sum(slept) == pytest.approx(4.0)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def revision(tmp_path, name, files):
    final = tmp_path / name / "rev"
    for rel, data in files.items():
        (final / rel).parent.mkdir(parents=True, exist_ok=True)
        (final / rel).write_bytes(data)
    return final


def sent(shelf):
    """The bytes a shelf served, once its streams have ended: a stream counts a block after writing it, so the fetcher
    may hold the last block before the server counts it (seen once in a rehearsal: 2 bytes short)."""
    deadline = time.monotonic() + 10
    while shelf.streams and time.monotonic() < deadline:
        time.sleep(0.01)
    return shelf.sent


WEIGHTS = {"config.json": b'{"a": 1}\n', "model.safetensors": os.urandom(3 * 1024 * 1024 + 17), "sub/t.json": b"{}"}


class Node:
    """One node: its shelf served on a port of its own."""

    def __init__(self, tmp_path, name, files=None, stall=5.0):
        self.name = name
        if files is not None:
            final = revision(tmp_path, name, files)
            self.shelf = Shelf(str(final), build_manifest(str(final)))
        else:
            (tmp_path / name).mkdir()
            self.shelf = Shelf(str(tmp_path / name / "rev"))
        self.port = free_port()
        self.server = serve(self.shelf, "127.0.0.1", self.port, TOKEN, RateLimit(0), stall=stall)

    def fetcher(self, sources, token=TOKEN, timeout=5.0):
        return Fetcher(self.name, self.shelf, {n.name: ("127.0.0.1", n.port) for n in sources}, token, RateLimit(0),
                       timeout=timeout)  # fmt: skip

    def fetch(self, sources, **kwargs):
        fetcher = self.fetcher(sources, **kwargs)
        self.shelf.manifest = fetcher.manifest()
        os.makedirs(self.shelf.partial, exist_ok=True)
        fetcher.fetch_all()
        fetcher.report_done([n.name for n in sources])
        return fetcher

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def node(tmp_path):
    """Starts nodes (``node(name, files=None, stall=5.0)``) and stops every one at the test's end."""
    started = []

    def start(name, files=None, stall=5.0):
        started.append(Node(tmp_path, name, files, stall))
        return started[-1]

    yield start
    for each in started:
        each.stop()


def fetched(node):
    base = node.shelf.partial
    return {rel: open(os.path.join(base, rel), "rb").read() for rel in WEIGHTS}


def test_a_chain_streams_each_byte_leaves_the_seed_once_and_every_node_ends_intact(node):
    seed, b, c = node("a", WEIGHTS), node("b"), node("c")
    results = {}

    def run(member, sources):
        results[member.name] = member.fetch(sources)

    threads = [threading.Thread(target=run, args=(c, [b, seed])), threading.Thread(target=run, args=(b, [seed]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert fetched(b) == WEIGHTS and fetched(c) == WEIGHTS
    size = sum(len(data) for data in WEIGHTS.values())
    # The seed sent the weights once (to b); c got them from b, which served them as they arrived.
    assert sent(seed.shelf) == size and sent(b.shelf) == size
    assert results["b"].events == [] and results["c"].events == []
    # The manifest travels with the weights: c's copy can seed the next run.
    manifest = json.loads(open(os.path.join(c.shelf.partial, model_share.MANIFEST)).read())
    assert manifest == seed.shelf.manifest
    assert wait_for_downstream(seed.shelf, ["b", "c"], idle=5) == []


def test_a_transfer_cut_short_resumes_where_it_stopped(node):
    seed, b = node("a", WEIGHTS), node("b")
    os.makedirs(b.shelf.partial)
    half = len(WEIGHTS["model.safetensors"]) // 2
    with open(os.path.join(b.shelf.partial, "model.safetensors"), "wb") as handle:
        handle.write(WEIGHTS["model.safetensors"][:half])
    fetcher = b.fetch([seed])
    assert fetched(b) == WEIGHTS
    assert fetcher.received == sum(len(data) for data in WEIGHTS.values()) - half


def test_a_corrupted_copy_on_a_peer_is_fetched_again_from_another_naming_node_and_file(node):
    seed = node("a", WEIGHTS)
    damaged = dict(WEIGHTS, **{"model.safetensors": b"x" + WEIGHTS["model.safetensors"][1:]})
    bad = node("b", damaged)
    bad.shelf.manifest = seed.shelf.manifest  # b believes its copy is the revision
    c = node("c")
    fetcher = c.fetch([bad, seed])
    assert fetched(c) == WEIGHTS
    assert fetcher.events == [
        "c: model.safetensors from b does not match the revision's SHA-256: fetched again from another peer"
    ]


def test_a_peer_that_never_gets_the_file_is_left_for_one_that_has_it(node):
    # b has the manifest but never receives the file (its own upstream died): c waits `stall` seconds, then goes on
    # from the seed, from where it was.
    seed = node("a", WEIGHTS)
    stuck = node("b", stall=0.5)
    stuck.shelf.manifest = seed.shelf.manifest
    c = node("c")
    fetcher = c.fetch([stuck, seed])
    assert fetched(c) == WEIGHTS
    assert fetcher.events and all("from b cut short" in event for event in fetcher.events)


def test_a_peer_that_went_away_is_named_once_and_not_asked_again(node):
    # b served the manifest, then died: its port refuses. c takes every file from the seed and says so once.
    seed, b, c = node("a", WEIGHTS), node("b"), node("c")
    b.shelf.manifest = seed.shelf.manifest
    fetcher = c.fetcher([b, seed])
    c.shelf.manifest = fetcher.manifest()
    b.stop()
    os.makedirs(c.shelf.partial)
    fetcher.fetch_all()
    assert fetched(c) == WEIGHTS
    assert fetcher.events == ["c: b went away (connection refused while fetching config.json): not asked again"]
    assert sent(seed.shelf) == sum(len(data) for data in WEIGHTS.values())


def test_a_request_without_the_runs_token_gets_nothing(node):
    seed, b = node("a", WEIGHTS), node("b")
    with pytest.raises(ShareError, match=r"b could not read the revision's manifest from any peer \(a: HTTP 401"):
        b.fetch([seed], token="wrong", timeout=0.5)
    assert seed.shelf.sent == 0


def test_a_node_that_cannot_get_a_file_intact_says_which_and_from_whom(tmp_path, node):
    seed = node("a", dict(WEIGHTS, **{"config.json": b'{"a": 2}\n'}))
    seed.shelf.manifest = build_manifest(str(revision(tmp_path, "truth", WEIGHTS)))
    b = node("b")
    with pytest.raises(
        ShareError,
        match=r"b could not get config.json \(9 bytes\) intact from any of its peers a: "
        r"b: config.json from a does not match",
    ):
        b.fetch([seed])


def test_a_damaged_resumed_part_is_fetched_again_whole_from_the_same_peer(node):
    # The only peer is right; the bytes left by an earlier transfer are not: the peer is not blamed.
    seed, b = node("a", WEIGHTS), node("b")
    os.makedirs(b.shelf.partial)
    with open(os.path.join(b.shelf.partial, "model.safetensors"), "wb") as handle:
        handle.write(b"#" * 1000)
    fetcher = b.fetch([seed])
    assert fetched(b) == WEIGHTS
    assert fetcher.events == [
        "b: model.safetensors, resumed from an earlier transfer, does not match the revision's SHA-256: "
        "fetched again whole"
    ]


def test_a_node_serves_on_while_a_transfer_is_in_progress_and_stops_once_idle(tmp_path):
    shelf = Shelf(str(tmp_path / "rev"))
    shelf.last_request -= 10  # the last request started long ago...
    shelf.streams = 1  # ...and its transfer is still going: not idle
    waiter = threading.Thread(target=lambda: setattr(shelf, "quiet", wait_for_downstream(shelf, ["b"], 1, 0.05)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()
    with shelf.lock:
        shelf.streams = 0
    waiter.join(5)
    assert not waiter.is_alive() and shelf.quiet == ["b"]
