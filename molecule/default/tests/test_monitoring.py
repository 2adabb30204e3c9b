"""Prometheus on the head scrapes every Ray, vLLM and node target, with the project's rules loaded."""

import json
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from conftest import HEAD_IP, wait_for

PROMETHEUS = f"http://{HEAD_IP}:9090"
RULES = Path(__file__).resolve().parents[3] / "roles/prometheus/files/rules"
# What the vLLM dashboard's core panels and the alert rules read, for the deployed vLLM version.
VLLM_CORE = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
]


def api(path, **params):
    url = f"{PROMETHEUS}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def test_every_ray_vllm_and_node_target_is_up():
    def all_up():
        targets = api("targets")["activeTargets"]
        by_job = {}
        for t in targets:
            by_job.setdefault(t["labels"]["job"], []).append((t["scrapeUrl"], t["health"], t.get("lastError")))
        ok = all(health == "up" for job in ("ray", "vllm", "node") for _, health, _ in by_job.get(job, [("", "", "")]))
        return by_job if ok else None

    by_job = wait_for(all_up, timeout=120, interval=5)
    assert len(by_job["ray"]) == 3 + 2  # every node's export port, plus the head's autoscaler and dashboard ports
    assert len(by_job["vllm"]) == 1
    assert len(by_job["node"]) == 3
    assert "dcgm" not in by_job  # no NVIDIA GPUs in the sandbox


def test_ray_reports_every_node():
    result = wait_for(lambda: api("query", query="count(ray_node_cpu_count)")["result"], timeout=60)
    assert result[0]["value"][1] == "3"


def test_the_alert_rules_are_loaded_and_quiet_on_a_healthy_fleet():
    groups = {g["name"]: g for g in api("rules")["groups"]}
    assert {"rayvllm-targets", "rayvllm-ray", "rayvllm-vllm", "rayvllm-gpu"} <= set(groups)
    firing = [a for a in api("alerts")["alerts"] if a["state"] == "firing"]
    assert firing == []


def test_every_rule_expression_parses_on_the_live_prometheus():
    for path in sorted(RULES.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                api("query", query=rule["expr"])  # a parse error is status "error" (HTTP 400)


def test_vllm_core_metrics_have_data():
    def present():
        missing = [m for m in VLLM_CORE if not api("query", query=f"count({{__name__='{m}'}})")["result"]]
        return not missing or None

    wait_for(present, timeout=90, interval=5)
