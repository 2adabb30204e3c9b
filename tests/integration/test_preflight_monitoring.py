"""Bad monitoring settings fail in preflight, before any host changes, naming the fix."""

import json

import pytest
from conftest import ROOT, local_hosts

GOOD = {"grafana_admin_password": "a-real-secret"}


def with_monitoring(monitoring="node-a", **hostvars):
    inventory = local_hosts(**hostvars)
    inventory["all"]["children"]["monitoring"] = {"hosts": {monitoring: None}}
    return inventory


def test_good_monitoring_settings_pass(run_preflight):
    rc, out = run_preflight(with_monitoring(), GOOD)
    assert rc == 0, out
    assert "Preflight | validate the monitoring hosts' settings" in out


# The default ('admin'), and unset (the role's default); an empty one: tests/unit/.../inputs/test_grafana_inputs.py.
@pytest.mark.parametrize("password", ["admin", None])
def test_default_grafana_password_stops_site_before_any_host_changes(run_preflight, password):
    group_vars = {} if password is None else {"grafana_admin_password": password}
    rc, out = run_preflight(with_monitoring(), group_vars, playbook="site.yml")
    assert rc != 0
    assert "grafana_admin_password on node-a is empty or the default 'admin'" in out
    assert "ansible-vault encrypt_string --name grafana_admin_password" in out
    assert "TASK [rayvllm.fleet.host_prep" not in out
    assert "TASK [rayvllm.fleet.ray" not in out.split("Preflight | validate the monitoring")[1]


def test_empty_vllm_target_list(run_preflight):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_vllm_hosts": []})
    assert rc != 0
    assert "Prometheus on node-a would scrape an empty target list" in out
    assert "vLLM servers (0)" in out


def test_empty_ray_and_node_target_lists_from_a_wrong_group(run_preflight):
    wrong = "{{ groups['gpu_nodes'] | default([]) }}"
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_ray_hosts": wrong})
    assert rc != 0
    assert "Ray nodes (0)" in out and "node exporters (0)" in out


def test_service_discovery_needs_prometheus_on_the_head(run_preflight):
    rc, out = run_preflight(with_monitoring("node-b"), {**GOOD, "prometheus_ray_service_discovery": True})
    assert rc != 0
    assert "prometheus_ray_service_discovery is true on node-b, which is not the Ray head" in out


def test_archive_install_needs_version_and_checksum(run_preflight):
    rc, out = run_preflight(
        with_monitoring(), {**GOOD, "prometheus_install_source": "archive", "prometheus_version": "2.53.3"}
    )
    assert rc != 0
    assert "needs prometheus_version as an exact X.Y.Z" in out
    assert "sha256:<64 hex digits>" in out


def test_missing_extra_rule_file(run_preflight, tmp_path):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_extra_rule_files": [str(tmp_path / "nope.yml")]})
    assert rc != 0
    assert "missing: " + str(tmp_path / "nope.yml") in out


def test_extra_dashboard_on_another_datasource(run_preflight, tmp_path):
    dashboard = json.loads((ROOT / "roles/grafana/files/dashboards/vllm.json").read_text())
    dashboard["uid"] = "team-dashboard"
    dashboard["panels"][2]["targets"][0]["datasource"] = {"type": "prometheus", "uid": "old-prometheus"}
    path = tmp_path / "team.json"
    path.write_text(json.dumps(dashboard))
    rc, out = run_preflight(with_monitoring(), {**GOOD, "grafana_extra_dashboards": [str(path)]})
    assert rc != 0
    assert "panel 'Token throughput' target A of dashboard 'rayvllm / vLLM' uses datasource" in out
    assert "old-prometheus" in out and "not the provisioned Prometheus (uid rayvllm-prometheus)" in out


def test_datasource_name_must_be_the_one_ray_embeds(run_preflight):
    rc, out = run_preflight(
        with_monitoring(), {**GOOD, "ray_prometheus_name": "Prometheus", "grafana_prometheus_datasource_name": "prom"}
    )
    assert rc != 0
    assert "grafana_prometheus_datasource_name is 'prom' but the Ray heads run with" in out
    assert "RAY_PROMETHEUS_NAME 'Prometheus'" in out


def test_extra_rule_file_named_like_the_projects(run_preflight, tmp_path):
    path = tmp_path / "rayvllm-alerts.yml"
    path.write_text("groups: []\n")
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_extra_rule_files": [str(path)]})
    assert rc != 0
    assert (
        "whose names differ from each other and from the project's rules (rayvllm-alerts.yml, rayvllm-alerts.yml)"
        in out
    )


def test_alert_duration_of_an_alert_no_rule_defines(run_preflight):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_alert_for": {"ScrapeTargetDwn": "30s"}})
    assert rc != 0
    assert "prometheus_alert_for on node-a names alerts no rule file defines: ScrapeTargetDwn" in out


@pytest.mark.parametrize("name", ["vllm.json", "ray-default.json"])
def test_extra_dashboard_named_like_a_managed_one(run_preflight, tmp_path, name):
    path = tmp_path / name
    path.write_text((ROOT / "roles/grafana/files/dashboards/gpu.json").read_text())
    rc, out = run_preflight(with_monitoring(), {**GOOD, "grafana_extra_dashboards": [str(path)]})
    assert rc != 0
    assert "grafana_extra_dashboards must not share a file name" in out and name in out


# One case each: preflight stops on them. Every unusable value: tests/unit/.../inputs/test_monitoring_inputs.py.
def test_unusable_alertmanager_receivers_or_route(run_preflight):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "alertmanager_route": {"receiver": "pager"}})
    assert rc != 0
    assert "Alertmanager on node-a:" in out and "(got pager)" in out, out[-3000:]


def test_unusable_watchdog_settings(run_preflight):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "vllm_watchdog_failures": 0})
    assert rc != 0
    assert "vllm_watchdog on node-a:" in out and "failures=0" in out, out[-3000:]


def test_a_retention_that_would_split_into_arguments_is_refused(run_preflight):
    rc, out = run_preflight(with_monitoring(), {**GOOD, "prometheus_retention_time": "15d --web.enable-lifecycle"})
    assert rc != 0
    assert "prometheus_retention_time a duration such as 15d (got '15d --web.enable-lifecycle')" in out
