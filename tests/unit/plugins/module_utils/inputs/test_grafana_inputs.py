"""Grafana's admin password: the default 'admin', empty, or not a string is refused (spaces and case aside)."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import grafana as inputs


def problems(password):
    values = {"grafana_admin_password": password, "grafana_install_source": "apt", "grafana_extra_dashboards": []}
    return [p for p in inputs.problems(values, "mon-1", {}, {}) if "grafana_admin_password" in p]


@pytest.mark.parametrize("password", ["admin", "", "admin ", " Admin", "   ", None, ["admin"], 1234])
def test_the_default_or_no_password_is_refused(password):
    (problem,) = problems(password)
    assert problem.startswith("grafana_admin_password on mon-1 is empty or the default 'admin'")
    assert "ansible-vault encrypt_string --name grafana_admin_password" in problem


def test_a_real_password_passes():
    assert problems("correct horse battery staple") == []
    assert problems("administrator-2026") == []
