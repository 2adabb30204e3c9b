"""Monitoring on the sandbox, against live metrics.

Prometheus on the head scrapes every Ray, vLLM and node target with the project's
rules loaded; every PromQL of the deployed dashboards and rules parses on it; the
vLLM dashboard's panels return data from the deployed vLLM; Grafana's provisioning
resolves; bad monitoring input fails before Prometheus restarts; the release-archive
install and Ray's service-discovery file work and switch back.
"""

import hashlib
import http.server
import json
import re
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import testinfra
import yaml
from conftest import HEAD_IP, ROOT, SETTINGS, playbook, wait_for

from ansible_collections.rayvllm.fleet.plugins.module_utils import grafana_dashboard

PROMETHEUS = f"http://{HEAD_IP}:9090"
RULES = ROOT / "roles/prometheus/files/rules"
GRAFANA_DIR = "/etc/grafana"
DASHBOARD_DIR = "/var/lib/grafana/dashboards/rayvllm"
DATASOURCE_UID = "rayvllm-prometheus"
VLLM_URL = f"http://{HEAD_IP}:{SETTINGS.get('vllm_port', 8000)}"


def head():
    return testinfra.get_host("docker://ray-head")


def api(path, **params):
    url = f"{PROMETHEUS}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as err:  # a query that does not parse is HTTP 400 with the reason
        raise AssertionError(f"{path} {params}: HTTP {err.code} {err.read().decode()[:300]}") from None
    assert body["status"] == "success", body
    return body["data"]


def targets_by_job():
    by_job = {}
    for t in api("targets")["activeTargets"]:
        by_job.setdefault(t["labels"]["job"], []).append(t)
    return by_job


def all_up(jobs=("ray", "vllm", "node")):
    by_job = targets_by_job()
    ok = all(by_job.get(job) and all(t["health"] == "up" for t in by_job[job]) for job in jobs)
    return by_job if ok else None


def prometheus_pid():
    return head().check_output("systemctl show -p MainPID --value prometheus")


def prometheus_binary():
    """The program the running Prometheus was started as (/proc/PID/exe needs ptrace rights the host lacks)."""
    return head().check_output(f"tr '\\0' '\\n' < /proc/{prometheus_pid()}/cmdline | head -n1")


def deployed_dashboards():
    names = head().check_output(f"ls {DASHBOARD_DIR}").split()
    return {name: head().file(f"{DASHBOARD_DIR}/{name}").content_string for name in names}


def test_every_ray_vllm_and_node_target_is_up():
    by_job = wait_for(all_up, timeout=120, interval=5)
    ray = sorted((t["labels"]["ray_target"], t["scrapeUrl"]) for t in by_job["ray"])
    # every node's export port, plus the head's autoscaler and dashboard ports
    assert [kind for kind, _ in ray] == ["head", "head", "node", "node", "node"], ray
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


def test_every_dashboard_query_parses_on_the_live_prometheus():
    dashboards = deployed_dashboards()
    assert {"vllm.json", "gpu.json", "ray-default.json"} <= set(dashboards), sorted(dashboards)
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
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + SETTINGS["vllm_api_key"]}
    for i in range(n):
        body = {"model": SETTINGS["vllm_served_model_name"], "prompt": f"Count to {i + 3}:", "max_tokens": 6}
        request = urllib.request.Request(VLLM_URL + "/v1/completions", json.dumps(body).encode(), headers)
        with urllib.request.urlopen(request, timeout=600) as response:
            assert json.load(response)["usage"]["completion_tokens"] >= 1


def test_every_vllm_dashboard_panel_returns_data_from_the_deployed_vllm():
    """A panel whose query returns nothing for this vLLM version (e.g. a renamed metric) fails."""
    completions()
    queries = grafana_dashboard.panel_queries(head().file(f"{DASHBOARD_DIR}/vllm.json").content_string, "2m")
    titles = {title for title, _, _ in queries}
    core = {"Requests running", "Requests waiting", "Token throughput", "Time to first token", "Inter-token latency",
            "KV cache usage"}  # fmt: skip
    assert core <= titles, titles

    def without_data():
        return [(title, ref, expr) for title, ref, expr in queries if not api("query", query=expr)["result"]]

    missing = without_data()
    for _ in range(9):  # rates need two scrapes after the completions
        if not missing:
            break
        time.sleep(10)
        missing = without_data()
    assert not missing, "vLLM dashboard queries with no data:\n" + "\n".join(map(str, missing))


def test_grafana_provisioning_resolves_to_prometheus():
    host = head()
    env = dict(line.split("=", 1) for line in host.file("/etc/ray/ray.env").content_string.splitlines() if "=" in line)
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
    env = head().file("/etc/ray/ray.env").content_string
    assert f"RAY_PROMETHEUS_HOST=http://{HEAD_IP}:9090" in env
    assert f"RAY_GRAFANA_HOST=http://{HEAD_IP}:3000" in env and f"RAY_GRAFANA_IFRAME_HOST=http://{HEAD_IP}:3000" in env
    for worker in ("ray-worker-1", "ray-worker-2"):
        assert "RAY_GRAFANA" not in testinfra.get_host("docker://" + worker).file("/etc/ray/ray.env").content_string
    # The dashboard's Metrics tab queries Prometheus through RAY_PROMETHEUS_HOST.
    url = f"http://{HEAD_IP}:{SETTINGS['ray_dashboard_port']}/api/prometheus_health"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert json.load(response)["result"] is True


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


def test_a_rule_file_that_does_not_parse_fails_before_prometheus_restarts(tmp_path):
    broken = tmp_path / "team-alerts.yml"
    broken.write_text("groups:\n  - name: team\n    rules:\n      - alert: Broken\n        expr: sum(rate(up[5m])\n")
    groups_before = sorted(g["name"] for g in api("rules")["groups"])
    pid = prometheus_pid()
    rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e",
                       json.dumps({"prometheus_extra_rule_files": [str(broken)]}))  # fmt: skip
    assert rc != 0
    assert "team-alerts.yml" in out and "failed to validate" in out, out[-3000:]
    assert "parse error" in out or "could not parse" in out, out[-3000:]
    assert prometheus_pid() == pid
    assert not head().file("/etc/prometheus/rules/team-alerts.yml").exists
    assert sorted(g["name"] for g in api("rules")["groups"]) == groups_before


def serve(directory):
    """Serve a directory on the sandbox network's gateway address, as a mirror would."""
    handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(directory), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("10.77.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def release_archive(tmp_path):
    """A release-shaped archive holding Debian's prometheus 2.42.0 binaries (no upstream download reachable)."""
    binaries = ROOT / ".cache/promtool/x/usr/bin"
    name = "prometheus-2.42.0.linux-amd64"
    archive = tmp_path / f"{name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for binary in ("prometheus", "promtool"):
            tar.add(binaries / binary, f"{name}/{binary}")
        for empty in ("consoles", "console_libraries"):
            (tmp_path / empty).mkdir()
            tar.add(tmp_path / empty, f"{name}/{empty}")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_release_archive_install_checks_the_checksum_and_switches_back(tmp_path):
    archive, sha256 = release_archive(tmp_path)
    server = serve(tmp_path)
    archive_vars = {
        "prometheus_install_source": "archive",
        "prometheus_version": "2.42.0",
        "prometheus_archive_url": f"http://10.77.0.1:{server.server_address[1]}/{archive.name}",
        "prometheus_archive_checksum": "sha256:" + "0" * 64,
    }
    try:
        pid = prometheus_pid()
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc != 0 and "checksum" in out.lower(), out[-3000:]
        assert prometheus_pid() == pid

        archive_vars["prometheus_archive_checksum"] = "sha256:" + sha256
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc == 0, out[-3000:]
        assert prometheus_binary() == "/opt/prometheus/current/prometheus"
        assert head().file("/opt/prometheus/current").linked_to == "/opt/prometheus/2.42.0"
        assert "2.42.0" in head().check_output("/opt/prometheus/current/prometheus --version 2>&1")
        wait_for(all_up, timeout=120, interval=5)
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc == 0 and re.search(r"ray-head\s+: ok=\d+\s+changed=0", out), out[-2000:]
    finally:
        server.shutdown()
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus")
    assert rc == 0, out[-3000:]
    assert prometheus_binary() == "/usr/bin/prometheus"
    assert not head().file("/etc/systemd/system/prometheus.service").exists
    wait_for(all_up, timeout=120, interval=5)


def test_ray_service_discovery_file_lists_the_same_targets():
    try:
        sd = "prometheus_ray_service_discovery=true"
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", sd)
        assert rc == 0, out[-3000:]

        def discovered():
            by_job = all_up()
            ray = (by_job or {}).get("ray", [])
            from_file = [t for t in ray if "__meta_filepath" in t["discoveredLabels"]]
            return ray if len(from_file) == len(ray) == 5 else None

        ray = wait_for(discovered, timeout=120, interval=5)
        assert sorted(t["labels"]["ray_target"] for t in ray) == ["head", "head", "node", "node", "node"]
        assert wait_for(lambda: api("query", query="count(ray_node_cpu_count)")["result"])[0]["value"][1] == "3"
    finally:
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus")
    assert rc == 0, out[-3000:]
    wait_for(lambda: all_up() and all("__meta_filepath" not in t["discoveredLabels"] for t in all_up()["ray"]))
