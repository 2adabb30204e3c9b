"""Monitoring on the sandbox, against live metrics.

Prometheus on the head scrapes every Ray, vLLM and node target with the project's
rules loaded; every PromQL of the deployed dashboards and rules parses on it; the
vLLM dashboard's panels return data from the deployed vLLM; Grafana's provisioning
resolves; every target carries its Ray cluster and host. What changes the fleet (a bad rule
file, the release-archive install, Ray's service-discovery file) runs in its own
stage: molecule/default/stages/test_1_monitoring_changes.py.
"""

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import testinfra
import yaml
from sandbox import (
    DASHBOARD_DIR,
    DATASOURCE_UID,
    GRAFANA_DIR,
    ALL_NODE_IPS,
    CLUSTER_URLS,
    HEAD_IP,
    ROUTER_URL,
    RULES,
    SETTINGS,
    VLLM_URL,
    all_up,
    environment_file,
    api,
    complete,
    head,
    playbook,
    ray_api,
    sh,
    task_results,
    vllm_api_key,
    wait_for,
)

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import grafana_dashboard


def deployed_dashboards():
    names = head().check_output(f"ls {DASHBOARD_DIR}").split()
    return {name: head().file(f"{DASHBOARD_DIR}/{name}").content_string for name in names}


def test_every_ray_vllm_and_node_target_is_up():
    by_job = wait_for(all_up, timeout=120, interval=5)
    ray = sorted((t["labels"]["ray_target"], t["scrapeUrl"]) for t in by_job["ray"])
    # every node's export port, plus the head's autoscaler and dashboard ports
    assert [kind for kind, _url in ray] == ["head"] * 4 + ["node"] * 4, ray  # two clusters: default (3), b (1)
    assert len(by_job["vllm"]) == 1  # cluster default's vLLM server; cluster b's Serve reports through Ray
    assert len(by_job["node"]) == 4
    assert "dcgm" not in by_job  # no NVIDIA GPUs in the sandbox


def test_every_target_carries_its_cluster_and_host():
    """Cluster 'default' (no ray_cluster_name: the default) and cluster 'b' (ray-b-head's host_vars)."""
    name_of = {ip: name for name, ip in ALL_NODE_IPS.items()}
    by_job = wait_for(all_up, timeout=120, interval=5)
    for job in ("ray", "vllm", "node"):
        for target in by_job[job]:
            labels = target["labels"]
            assert labels["host"] == name_of[labels["instance"].rsplit(":", 1)[0]], target
            assert labels["ray_cluster"] == ("b" if labels["host"] == "ray-b-head" else "default"), target
    # vLLM's own server runs on cluster default's head only: cluster b's engines report through Ray (below).
    assert {t["labels"]["host"] for t in by_job["vllm"]} == {"ray-head"}


def test_cluster_b_reports_serve_and_its_engines_through_ray_with_its_cluster():
    """Cluster b serves through Ray Serve LLM: Serve's metrics (ray_serve_*) and its replicas' engines' (ray_vllm_*)
    come from Ray's metrics export port, labelled with the cluster and host like every target's."""
    # A request, for the request counters to exist. Its time is printed: on a fresh clone's sandbox (.ci/run of
    # 3432862) this first completion to b once took over 30 s, cause not found.
    started = time.monotonic()
    complete(url=CLUSTER_URLS["b"], timeout=180)
    print(f"first completion to cluster b: {time.monotonic() - started:.1f} s")
    for query in ("ray_serve_application_status", "ray_vllm_generation_tokens_total",
                  "ray_serve_num_http_requests_total"):  # fmt: skip
        series = wait_for(lambda q=query: api("query", query=q)["result"], timeout=120, interval=5)
        assert {(s["metric"]["ray_cluster"], s["metric"]["host"]) for s in series} == {("b", "ray-b-head")}, query
    (status,) = api("query", query="ray_serve_application_status")["result"]
    assert status["value"][1] == "6", status  # RUNNING (the rule file names the values)
    # Ray's Serve LLM dashboard (grafana_ray_dashboards) shows b's engines: its panels' queries return data.
    text = deployed_dashboards()["ray-serve_llm.json"]
    queries = grafana_dashboard.panel_queries(text, "2m")
    # Until five of them do: the gauges answer at the first scrape, the rates over 2m only once two scrapes have
    # seen the request's counters (the rehearsal of dbc8be0 looked once, seconds after the request, and found 3).
    with_data = []

    def five_panels_with_data():
        with_data[:] = [title for title, _ref, expr in queries if api("query", query=expr)["result"]]
        return len(with_data) >= 5

    try:
        wait_for(five_panels_with_data, timeout=180, interval=10)
    except AssertionError:
        raise AssertionError(f"after 180 s, fewer than 5 panels with data: {with_data}") from None


def test_ray_reports_every_node():
    result = wait_for(lambda: api("query", query="count(ray_node_cpu_count)")["result"], timeout=60)
    assert result[0]["value"][1] == "4"


def test_prometheus_never_ran_the_packages_own_configuration():
    """Debian's default configuration scrapes localhost:9090/9100; the managed one scrapes the fleet's addresses."""
    assert api("series", **{"match[]": 'up{instance=~"localhost:.*"}'}) == []
    assert not head().file("/usr/sbin/policy-rc.d").exists


def test_the_alert_rules_are_loaded_and_quiet_on_a_healthy_fleet():
    groups = {g["name"]: g for g in api("rules")["groups"]}
    assert {"rayvllm-targets", "rayvllm-ray", "rayvllm-vllm", "rayvllm-gpu"} <= set(groups)
    firing = [a for a in api("alerts")["alerts"] if a["state"] == "firing"]
    assert firing == []
    # The sandbox's prometheus_alert_for sets ScrapeTargetDown's `for` (30 s); the other rules keep the project's.
    durations = {r["name"]: r.get("duration") for g in groups.values() for r in g["rules"] if r["type"] == "alerting"}
    assert durations["ScrapeTargetDown"] == 30 and durations["RayNodesMissing"] == 120, durations


def test_every_rule_expression_parses_on_the_live_prometheus():
    paths = sorted(RULES.glob("*.yml"))
    rules = [rule for path in paths for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]
    # Not vacuous: the project's rule files are there and hold the rules whose groups the test above finds loaded.
    assert paths and len(rules) >= 10, (RULES, paths, len(rules))
    for rule in rules:
        api("query", query=rule["expr"])  # a parse error is status "error" (HTTP 400)


def test_every_dashboard_query_parses_on_the_live_prometheus():
    dashboards = deployed_dashboards()
    assert {"vllm.json", "gpu.json", "ray-default.json", "ray-serve_llm.json"} <= set(dashboards), sorted(dashboards)
    count = 0
    for name, text in dashboards.items():
        for title, ref, expr in grafana_dashboard.panel_queries(text):
            try:
                api("query", query=expr)
            except AssertionError as err:
                raise AssertionError(f"{name} panel {title!r} query {ref}: {err}") from None
            count += 1
    assert count > 100, count  # Ray's dashboards alone hold hundreds


def completions(n=4):
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + vllm_api_key()}
    for i in range(n):
        body = {"model": SETTINGS["vllm_served_model_name"], "prompt": f"Count to {i + 3}:", "max_tokens": 6}
        request = urllib.request.Request(VLLM_URL + "/v1/completions", json.dumps(body).encode(), headers)
        with urllib.request.urlopen(request, timeout=600) as response:
            assert json.load(response)["usage"]["completion_tokens"] >= 1


def test_every_vllm_dashboard_panel_returns_data_from_the_deployed_vllm():
    """A panel whose query returns nothing for this vLLM version (e.g. a renamed metric) fails."""
    completions()
    queries = grafana_dashboard.panel_queries(head().file(f"{DASHBOARD_DIR}/vllm.json").content_string, "2m")
    titles = {title for title, _ref, _expr in queries}
    core = {"Requests running", "Requests waiting", "Token throughput", "Time to first token", "Inter-token latency",
            "KV cache usage"}  # fmt: skip
    assert core <= titles, titles

    for _completion in range(4):
        complete(url=ROUTER_URL)
    # The door's refusals panel: a model the fleet does not serve gets the door's 404, counted for tenant "-".
    with pytest.raises(urllib.error.HTTPError) as refused:
        complete(url=ROUTER_URL, model="no-such-model")
    assert refused.value.code == 404
    # The router's errors panel has no series until a request fails (vllm_router_request_errors_total).
    quiet = {"Router errors and retries"}

    def without_data():
        return [(title, ref, expr) for title, ref, expr in queries
                if title not in quiet and not api("query", query=expr)["result"]]  # fmt: skip

    missing = without_data()
    for _scrape in range(9):  # rates need two scrapes after the completions
        if not missing:
            break
        time.sleep(10)
        missing = without_data()
    assert not missing, "vLLM dashboard queries with no data:\n" + "\n".join(map(str, missing))


def test_grafana_provisioning_resolves_to_prometheus():
    host = head()
    env = environment_file(host.file("/etc/ray/monitoring.env").content_string)
    ini = host.file(f"{GRAFANA_DIR}/grafana.ini")
    assert (ini.user, ini.group, ini.mode) == ("root", "grafana", 0o640)
    assert f"admin_password = $__file{{{GRAFANA_DIR}/admin_password}}" in ini.content_string
    assert "allow_embedding = true" in ini.content_string
    assert re.search(r"\[auth.anonymous\]\nenabled = false", ini.content_string)
    password = host.file(f"{GRAFANA_DIR}/admin_password")
    assert password.mode == 0o640 and password.content_string == SETTINGS["grafana_admin_password"]

    sources = yaml.safe_load(host.file(f"{GRAFANA_DIR}/provisioning/datasources/rayvllm.yml").content_string)
    [source] = sources["datasources"]
    assert source["uid"] == DATASOURCE_UID and source["isDefault"] is True
    assert source["name"] == env["RAY_PROMETHEUS_NAME"]  # what the Ray dashboard embeds
    # Grafana's URL for Prometheus answers from the Grafana host.
    up = host.check_output(
        'python3 -c "import json,urllib.request;'
        f"print(json.load(urllib.request.urlopen('{source['url']}/api/v1/query?query=up'))['status'])\""
    )
    assert up == "success"

    providers = yaml.safe_load(host.file(f"{GRAFANA_DIR}/provisioning/dashboards/rayvllm.yml").content_string)
    assert [p["options"]["path"] for p in providers["providers"]] == [DASHBOARD_DIR]
    dashboards = deployed_dashboards()
    for name, text in dashboards.items():
        assert grafana_dashboard.dashboard_problems(text, DATASOURCE_UID, source["name"]) == [], name
    uids = {name: json.loads(text)["uid"] for name, text in dashboards.items()}
    assert len(set(uids.values())) == len(uids), uids
    ray_default = json.loads(dashboards["ray-default.json"])
    assert uids["ray-default.json"] == "rayDefaultDashboard"
    assert f"rayVersion:{SETTINGS['ray_version']}" in ray_default["tags"]  # generated by the Ray that runs


def test_ray_head_reaches_prometheus_and_points_at_grafana():
    # A file of its own, so a monitoring-only change does not restart the head (issue 13); the running
    # head's environment holds it.
    env = environment_file(head().file("/etc/ray/monitoring.env").content_string)
    assert env["RAY_PROMETHEUS_HOST"] == f"http://{HEAD_IP}:9090"
    assert env["RAY_GRAFANA_HOST"] == env["RAY_GRAFANA_IFRAME_HOST"] == f"http://{HEAD_IP}:3000"
    assert "RAY_GRAFANA" not in head().file("/etc/ray/ray.env").content_string
    pid = head().check_output("systemctl show -p MainPID --value ray-head")
    environ = head().check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
    assert f"RAY_GRAFANA_HOST=http://{HEAD_IP}:3000" in environ
    for worker in ("ray-worker-1", "ray-worker-2"):
        worker_host = testinfra.get_host("docker://" + worker)
        assert "RAY_GRAFANA" not in worker_host.file("/etc/ray/ray.env").content_string
        assert "RAY_GRAFANA" not in worker_host.file("/etc/ray/monitoring.env").content_string
    # The dashboard's Metrics tab queries Prometheus through RAY_PROMETHEUS_HOST.
    assert ray_api("/api/prometheus_health")["result"] is True


def test_grafana_server_serves_the_dashboards():
    host = head()
    if not host.exists("grafana-server"):
        pytest.skip("no grafana-server on ray-head: no registry reachable from the build machine ships one")
    with urllib.request.urlopen(f"http://{HEAD_IP}:3000/api/health", timeout=10) as response:
        assert json.load(response)["database"] == "ok"
    request = urllib.request.Request(f"http://{HEAD_IP}:3000/api/search?type=dash-db")
    auth = f"{SETTINGS.get('grafana_admin_user', 'admin')}:{SETTINGS['grafana_admin_password']}"
    request.add_header("Authorization", "Basic " + __import__("base64").b64encode(auth.encode()).decode())
    with urllib.request.urlopen(request, timeout=10) as response:
        found = {d["uid"] for d in json.load(response)}
    assert {json.loads(t)["uid"] for t in deployed_dashboards().values()} <= found


def test_a_node_exporter_stopped_by_hand_is_started_and_enabled_again():
    # The roles skip their systemd_service check of a unit that ran and started at boot as the run began
    # (fleet_running_units, read with the facts): a unit stopped and disabled behind the playbooks' back is not one.
    task = "Node exporter | running and enabled at boot"
    run = ("playbooks/monitoring.yml", "--limit", "ray-worker-2", "--tags", "node_exporter")
    sh("ray-worker-2", "systemctl disable --now prometheus-node-exporter")
    try:
        rc, out = playbook(*run)
        assert rc == 0, out[-3000:]
        assert [s for t, s, h in task_results(out) if t.endswith(task) and h == "ray-worker-2"] == ["changed"]
        assert sh("ray-worker-2", "systemctl is-active prometheus-node-exporter; systemctl is-enabled "
                  "prometheus-node-exporter").split() == ["active", "enabled"]  # fmt: skip
        rc, out = playbook(*run)
        assert rc == 0, out[-3000:]
        # Running and enabled as this run began: not checked.
        assert [s for t, s, h in task_results(out) if t.endswith(task) and h == "ray-worker-2"] == ["skipping"]
        assert re.search(r"ray-worker-2\s+: ok=\d+\s+changed=0 ", out), out[-2000:]
    finally:
        sh("ray-worker-2", "systemctl enable --now prometheus-node-exporter", check=False)
