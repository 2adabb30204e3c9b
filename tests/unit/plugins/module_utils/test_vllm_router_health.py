"""vllm-router-health: a router's rotation follows real completions and the playbooks' holds."""

import importlib.util
import json

from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils import vllm_router_health as rh

A, B = "http://10.0.0.1:8000", "http://10.0.1.1:8000"
OK, FAIL = {"ok": True, "error": ""}, {"ok": False, "error": "no answer after 15.0 s"}
NOW = 1_000_000.0


def round_(state, rotation, probes, holds=None, **settings):
    return rh.decide(state, [A, B], rotation, probes, holds or {}, NOW, settings or None)


def test_a_backend_failing_completions_leaves_rotation_after_the_threshold():
    state, actions, messages = round_({}, [A, B], {A: OK, B: FAIL})
    assert actions == [] and "1 of 2" in messages[0]
    state, actions, _messages = round_(state, [A, B], {A: OK, B: FAIL})
    assert actions == [("remove", B, "2 completions failed in a row (last: no answer after 15.0 s)")]


def test_the_last_backend_in_rotation_is_kept():
    state, _actions, _messages = round_({}, [B], {A: FAIL, B: FAIL})
    state, actions, messages = round_(state, [B], {A: FAIL, B: FAIL})
    assert actions == [] and "last backend in rotation: kept" in messages[0]


def test_a_recovered_backend_comes_back_after_successes_in_a_row():
    state, actions, _messages = round_({}, [A], {A: OK, B: OK})
    assert actions == []
    state, actions, _messages = round_(state, [A], {A: OK, B: FAIL})
    assert actions == [] and state[B]["successes"] == 0
    state, _actions, _messages = round_(state, [A], {A: OK, B: OK})
    state, actions, _messages = round_(state, [A], {A: OK, B: OK})
    assert actions == [("add", B, "2 completions in a row")]


def test_a_held_backend_is_taken_out_and_never_put_back_while_held():
    hold = {"until": NOW + 600, "by": "ansible-playbook (Switch)", "reason": "upgrade in progress"}
    state, actions, _messages = round_({}, [A, B], {A: OK}, {B: hold})
    assert actions == [("remove", B, "held out by ansible-playbook (Switch): upgrade in progress")]
    for _round in range(3):
        state, actions, _messages = round_(state, [A], {A: OK, B: OK}, {B: hold})
        assert actions == []
    # Held until a run removes it (a failed gate): the same; an expired rollout hold: not held.
    assert rh.hold_of({"until": 0}, NOW) == (True, False)
    assert rh.hold_of(hold, NOW) == (True, True)
    assert rh.hold_of({"until": NOW - 1}, NOW) == (False, False)
    state, actions, _messages = round_(state, [A], {A: OK, B: OK}, {B: {"until": NOW - 1}})
    assert actions == []
    state, actions, _messages = round_(state, [A], {A: OK, B: OK}, {B: {"until": NOW - 1}})
    assert actions == [("add", B, "2 completions in a row")]


def test_metrics_name_model_and_backend():
    text = rh.metrics([("llama", "a", 1, 0, 0), ("llama", "b", 0, 1, 0)])
    assert 'vllm_router_backend_in_rotation{model="llama",backend="b"} 0' in text
    assert 'vllm_router_backend_rollout{model="llama",backend="b"} 1' in text


def test_the_key_is_read_back_as_the_env_file_filter_writes_it(tmp_path):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.env_file import env_file

    (tmp_path / "k.env").write_text(env_file({"VLLM_ROUTER_API_KEY": 'a"b$c\\d'}))
    assert rh.read_env(str(tmp_path / "k.env")) == {"VLLM_ROUTER_API_KEY": 'a"b$c\\d'}


def launcher():
    spec = importlib.util.spec_from_file_location("launch", ROOT / "roles/router/files/vllm_router_launch.py")
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    return launch


def test_the_launcher_leaves_held_backends_out_of_the_worker_list(tmp_path):
    launch = launcher()
    (tmp_path / "holds").mkdir()
    config = {"instance": "llama", "backends": [{"cluster": "a", "url": A}, {"cluster": "b", "url": B}]}
    assert launch.worker_urls(config, str(tmp_path), NOW) == [A, B]
    (tmp_path / "holds" / "llama@b.json").write_text(json.dumps({"until": 0}))
    assert launch.worker_urls(config, str(tmp_path), NOW) == [A]
    (tmp_path / "holds" / "llama@b.json").write_text(json.dumps({"until": NOW - 5}))
    assert launch.worker_urls(config, str(tmp_path), NOW) == [A, B]


def test_power_of_two_with_fewer_than_two_backends_starts_with_round_robin():
    # vllm-router 0.1.17 exits at start with power_of_two and 0 or 1 workers (seen: "Power-of-two policy requires at
    # least 2 workers"), round_robin starts: a model one cluster serves, or a restart while one of two is held out.
    launch = launcher()
    args = ["--host", "0.0.0.0", "--policy", "power_of_two", "--port", "30000"]
    assert launch.with_workable_policy(args, [A, B]) == args
    assert launch.with_workable_policy(args, [A]) == ["--host", "0.0.0.0", "--policy", "round_robin", "--port", "30000"]
    assert launch.with_workable_policy(args, [])[3] == "round_robin"
    cache_aware = ["--policy", "cache_aware"]
    assert launch.with_workable_policy(cache_aware, [A]) == cache_aware
