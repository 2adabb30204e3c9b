"""Alertmanager's receivers and route, and the vLLM watchdog's counts: each unusable value refused, naming it (the
integration tests prove, with one case each, that preflight stops on them)."""

from pathlib import Path

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import alertmanager, prometheus, vllm_watchdog

from .roles import role_defaults as defaults


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"alertmanager_receivers": []}, "got names []"),
        ({"alertmanager_receivers": [{"webhook_configs": [{"url": "http://h:1/"}]}]}, 'got names [""]'),
        ({"alertmanager_receivers": [{"name": "ops"}, {"name": "ops"}]}, 'got names ["ops", "ops"]'),
        ({"alertmanager_route": {"receiver": "pager"}}, "(got pager)"),
        ({"alertmanager_receivers": "ops"}, "got names []"),
    ],
)
def test_unusable_alertmanager_receivers_or_route(settings, expected):
    (problem,) = alertmanager.problems(defaults("alertmanager", **settings), "mon-1", {}, {})
    assert problem.startswith("Alertmanager on mon-1:") and expected in problem


def test_the_default_alertmanager_settings_pass():
    assert alertmanager.problems(defaults("alertmanager"), "mon-1", {}, {}) == []


WATCHDOG = {"vllm_watchdog_model": "tiny-llama", "vllm_watchdog_url": "http://10.0.0.1:8000"}


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"vllm_watchdog_failures": 0}, "failures=0"),
        ({"vllm_watchdog_interval": "soon"}, "interval=soon"),
        ({"vllm_watchdog_backoff": 600, "vllm_watchdog_backoff_max": 300}, "backoff_max=300"),
        ({"vllm_watchdog_hold_timeout": 30}, "hold_timeout=30"),
    ],
)
def test_unusable_watchdog_settings(settings, expected):
    (problem,) = vllm_watchdog.problems(defaults("vllm_watchdog", **WATCHDOG, **settings), "head-1", {}, {})
    assert problem.startswith("vllm_watchdog on head-1:") and expected in problem


def test_the_default_watchdog_settings_pass():
    assert vllm_watchdog.problems(defaults("vllm_watchdog", **WATCHDOG), "head-1", {}, {}) == []


PROJECT_RULES = [str(Path(__file__).parents[5] / "roles/prometheus/files/rules/rayvllm-alerts.yml")]


def prometheus_problems(alert_for):
    hosts = {f"prometheus_{kind}_hosts": ["gpu-1"] for kind in ("ray", "vllm", "node")}
    settings = defaults("prometheus", prometheus_alert_for=alert_for, **hosts)
    model = {"clusters": {"default": {}}, "nodes": {}}
    return prometheus.problems(settings, "mon-1", model, {"rule_files": PROJECT_RULES})


@pytest.mark.parametrize(
    "alert_for, expected",
    [
        ({"ScrapeTargetDwn": "30s"}, "names alerts no rule file defines: ScrapeTargetDwn. The alerts: GpuEcc"),
        ({"ScrapeTargetDown": "2 minutes"}, "got ScrapeTargetDown: '2 minutes'"),
        ({"ScrapeTargetDown": 120}, "got ScrapeTargetDown: 120"),
        (["ScrapeTargetDown"], "must be a mapping {alert: duration} (got a list)"),
    ],
)
def test_unusable_alert_durations(alert_for, expected):
    (problem,) = prometheus_problems(alert_for)
    assert problem.startswith("prometheus_alert_for on mon-1") and expected in problem


def test_alert_durations_of_defined_alerts_pass():
    assert prometheus_problems({"ScrapeTargetDown": "30s", "VllmDown": "1h30m"}) == []
