"""vllm-router on ray-head in front of both sandbox clusters (default: 3 hosts, b: 1 host) serving tiny-llama."""

import json
import urllib.error

import pytest
import testinfra
from sandbox import (
    CLUSTER_URLS,
    ROUTER_URL,
    SETTINGS,
    all_up,
    api,
    bearer_request,
    complete,
    rotation,
    vllm_api_key,
    wait_for,
)

MODEL = SETTINGS["vllm_served_model_name"]
UNIT = f"vllm-router@{MODEL}.service"


def router_host():
    return testinfra.get_host("docker://ray-head")


def test_one_router_per_model_and_the_rotation_keeper_run():
    host = router_host()
    assert host.service(UNIT).is_running and host.service(UNIT).is_enabled
    assert host.service("vllm-router-health.timer").is_running
    assert host.file("/opt/vllm-router/current").linked_to == "/opt/vllm-router/0.1.17"
    config = json.loads(host.file(f"/etc/vllm-router/{MODEL}.json").content_string)
    assert config["backends"] == [{"cluster": c, "url": u} for c, u in sorted(CLUSTER_URLS.items())]


def test_both_clusters_are_in_rotation_and_the_router_answers_with_the_clusters_key():
    assert wait_for(lambda: sorted(rotation()) == sorted(CLUSTER_URLS.values()), timeout=60)
    assert complete(url=ROUTER_URL) >= 1
    # The router checks no key itself: the client's goes through to the backend, which refuses a wrong one.
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 1}
    for key in ("", "not-the-key"):
        with pytest.raises(urllib.error.HTTPError) as err:
            bearer_request(ROUTER_URL + "/v1/completions", key, body)
        assert err.value.code == 401


def test_the_key_is_in_no_command_line_and_only_root_reads_it():
    host = router_host()
    key = vllm_api_key()
    assert key not in host.check_output(f"systemctl show -p ExecStart --value {UNIT}")
    pid = host.check_output(f"systemctl show -p MainPID --value {UNIT}")
    assert key not in host.check_output(f"tr '\\0' ' ' < /proc/{pid}/cmdline")
    env = host.file(f"/etc/vllm-router/{MODEL}.env")
    assert env.mode == 0o600 and env.user == "root"
    # Both clusters serve with the one key the router's clients send.
    for url in CLUSTER_URLS.values():
        assert complete(url=url) >= 1


def test_prometheus_scrapes_the_router_and_the_rotation_metrics():
    by_job = wait_for(lambda: all_up(("vllm_router", "node")), timeout=120, interval=5)
    # One router per model behind the front door: tiny-chat's (cluster b) and tiny-llama's (both clusters).
    assert sorted(t["labels"]["model"] for t in by_job["vllm_router"]) == ["tiny-chat", MODEL]
    series = wait_for(lambda: len(api("query", query="vllm_router_backend_in_rotation")["result"]) == 3, timeout=60)
    series = api("query", query="vllm_router_backend_in_rotation")["result"]
    assert sorted((s["metric"]["model"], s["metric"]["backend"], s["value"][1]) for s in series) == [
        ("tiny-chat", "b", "1"),
        (MODEL, "b", "1"),
        (MODEL, "default", "1"),
    ]
    rules = {r["name"] for g in api("rules")["groups"] for r in g["rules"]}
    assert {"VllmRouterBackendOutOfRotation", "VllmRouterDown"} <= rules
