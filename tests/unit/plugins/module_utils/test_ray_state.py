import io
import json
from urllib.error import HTTPError, URLError

import pytest
from conftest import FIXTURES, FakeClock

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients import ray_state


def load(name):
    return (FIXTURES / name).read_text()


def test_parse_real_head_only_response():
    nodes = ray_state.parse_nodes(load("ray-2.60.0-nodes-head.json"))
    assert len(nodes) == 1
    assert nodes[0]["is_head"] is True
    assert nodes[0]["gpus"] == 2.0
    assert nodes[0]["cpus"] == 2.0


def test_node_without_gpu_key_counts_zero_and_head_first():
    nodes = ray_state.parse_nodes(load("ray-2.60.0-nodes-3-one-without-gpu.json"))
    assert [n["ip"] for n in nodes] == ["10.77.0.10", "10.77.0.11", "10.77.0.12"]
    assert [n["gpus"] for n in nodes] == [2.0, 2.0, 0.0]
    s = ray_state.summarize(nodes, min_nodes=3, min_gpus=4)
    assert s["total_gpus"] == 4.0 and s["ready"] is True
    assert ray_state.summarize(nodes, min_nodes=3, min_gpus=6)["ready"] is False


def test_dead_nodes_are_ignored_even_if_server_ignores_filter():
    payload = json.loads(load("ray-2.60.0-nodes-3-one-without-gpu.json"))
    payload["data"]["result"]["result"][1]["state"] = "DEAD"
    nodes = ray_state.parse_nodes(payload)
    assert [n["ip"] for n in nodes] == ["10.77.0.10", "10.77.0.12"]


def test_missing_ips_reported():
    nodes = ray_state.parse_nodes(load("ray-2.60.0-nodes-head.json"))
    s = ray_state.summarize(nodes, 1, 0, expected_ips=["192.0.2.2", "10.9.9.9"])
    assert s["missing_ips"] == ["10.9.9.9"]
    assert s["ready"] is False


@pytest.mark.parametrize(
    "body",
    [b"<html>not json</html>", json.dumps({"data": {}}), json.dumps({"result": False, "msg": "boom"})],
)
def test_bad_payloads_raise_unreachable(body):
    with pytest.raises(ray_state.DashboardUnreachable):
        ray_state.parse_nodes(body)


def test_wait_succeeds_when_nodes_join():
    full = ray_state.parse_nodes(load("ray-2.60.0-nodes-3-one-without-gpu.json"))
    readings = iter([full[:1], full[:2], full])
    fc = FakeClock()
    ok, summary, error = ray_state.wait_for_cluster(
        lambda: next(readings), 3, 4, timeout=60, interval=2, clock=fc.clock, sleep=fc.sleep
    )
    assert ok and error is None
    assert summary["alive_nodes"] == 3
    assert fc.sleeps == [2, 2]


def test_wait_times_out_with_shortfall_message():
    nodes = ray_state.parse_nodes(load("ray-2.60.0-nodes-3-one-without-gpu.json"))[:2]
    fc = FakeClock()
    ok, summary, error = ray_state.wait_for_cluster(
        lambda: nodes, 3, 6, expected_ips=["10.77.0.12"], timeout=10, interval=3, clock=fc.clock, sleep=fc.sleep
    )
    assert not ok and error is None
    assert fc.now == 10  # the last sleep is cut to the deadline
    msg = ray_state.shortfall_message(summary, 3, 6, 10, "http://h:8265")
    assert "2/3 ALIVE nodes" in msg
    assert "4/6 GPUs" in msg
    assert "missing IPs: 10.77.0.12" in msg


def test_wait_reports_unreachable_not_zero_nodes():
    def fetch():
        raise ray_state.DashboardUnreachable("cannot reach http://h:8265: Connection refused")

    fc = FakeClock()
    ok, summary, error = ray_state.wait_for_cluster(fetch, 1, timeout=5, interval=1, clock=fc.clock, sleep=fc.sleep)
    assert not ok and summary is None
    assert "Connection refused" in error


def test_wait_zero_timeout_polls_once():
    calls = []

    def fetch():
        calls.append(1)
        return []

    fc = FakeClock()
    ok, _summary, _error = ray_state.wait_for_cluster(fetch, 1, timeout=0, clock=fc.clock, sleep=fc.sleep)
    assert not ok and calls == [1] and fc.sleeps == []


def test_fetch_sends_bearer_token_and_filters_alive():
    seen = {}

    def opener(request, timeout):
        seen["url"] = request.full_url
        seen["auth"] = request.get_header("Authorization")
        return io.BytesIO(load("ray-2.60.0-nodes-head.json").encode())

    nodes = ray_state.fetch_nodes("http://h:8265/", token="s3cret", opener=opener)
    assert len(nodes) == 1
    assert seen["url"].startswith("http://h:8265/api/v0/nodes?")
    assert "filter_values=ALIVE" in seen["url"]
    assert seen["auth"] == "Bearer s3cret"


def test_fetch_http_401_hints_at_token():
    def opener(request, timeout):
        raise HTTPError(request.full_url, 401, "Unauthorized", {}, None)

    with pytest.raises(ray_state.DashboardUnreachable, match="token"):
        ray_state.fetch_nodes("http://h:8265", opener=opener)


def test_fetch_connection_refused():
    def opener(request, timeout):
        raise URLError(ConnectionRefusedError(111, "Connection refused"))

    with pytest.raises(ray_state.DashboardUnreachable, match="cannot reach http://h:8265"):
        ray_state.fetch_nodes("http://h:8265", opener=opener)


def test_read_token_file(tmp_path):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import read_token_file

    token = tmp_path / "auth_token"
    token.write_text("abc123\n")
    assert read_token_file(str(token)) == "abc123"
    token.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        read_token_file(str(token))
    with pytest.raises(ValueError, match="cannot read the Ray token file"):
        read_token_file(str(tmp_path / "missing"))


# --- what runs on a node (playbooks/remove_node.yml: vLLM's ranks on a leaving node) ---


def test_the_actors_query_asks_for_the_live_actors_of_one_node():
    url = ray_state.actors_url("http://h:8265/", "abc123")
    assert url.startswith("http://h:8265/api/v0/actors?")
    assert "filter_keys=node_id&filter_predicates=%3D&filter_values=abc123" in url
    assert "filter_keys=state&filter_predicates=%3D&filter_values=ALIVE" in url


def test_live_actors_are_counted_by_class():
    payload = {
        "result": True,
        "data": {
            "result": {
                "result": [
                    {"class_name": "RayWorkerWrapper", "state": "ALIVE"},
                    {"class_name": "RayWorkerWrapper", "state": "ALIVE"},
                    {"class_name": "RayWorkerWrapper", "state": "DEAD"},
                    {"class_name": "ServeReplica:app:LLMServer", "state": "ALIVE"},
                ]
            }
        },
    }
    assert ray_state.parse_actors(json.dumps(payload)) == {"RayWorkerWrapper": 2, "ServeReplica:app:LLMServer": 1}
    with pytest.raises(ray_state.DashboardUnreachable, match="no data.result.result"):
        ray_state.parse_actors({"data": {}})


def test_a_node_ray_does_not_list_runs_nothing_and_its_actors_are_not_asked_for():
    nodes = [{"ip": "10.0.0.1", "node_id": "n1"}, {"ip": "10.0.0.3", "node_id": "n3"}]
    asked = []

    def actors(node_id):
        asked.append(node_id)
        # What vLLM 0.32's RayExecutorV2 started on the sandbox (RayWorkerWrapper: its older executor).
        return {"RayWorkerProc": 2, "RayWorkerWrapper": 1, "ServeReplica:app:LLMServer": 1}

    work = ray_state.node_work(nodes, ["10.0.0.3", "10.0.0.9"], actors)
    assert work == {
        "10.0.0.3": {
            "alive": True,
            "node_id": "n3",
            "actors": {"RayWorkerProc": 2, "RayWorkerWrapper": 1, "ServeReplica:app:LLMServer": 1},
            "vllm_ranks": 3,
        },
        "10.0.0.9": {"alive": False, "node_id": "", "actors": {}, "vllm_ranks": 0},
    }
    assert asked == ["n3"]
