"""Alertmanager's receivers and route, and the vLLM watchdog's counts: each unusable value refused, naming it (the
integration tests prove, with one case each, that preflight stops on them)."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.inputs import alertmanager, vllm_watchdog

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
