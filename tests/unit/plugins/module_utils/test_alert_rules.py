"""prometheus_alert_for over a rule file's text: only the named alerts' `for` changes, the rest of the file (comments,
layout, a `for:` inside an expression) stays as it is, and Prometheus reads the result as the project's rules with
those durations."""

from pathlib import Path

import pytest
import yaml

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.alert_rules import (
    alert_names,
    is_duration,
    with_for,
)

PROJECT_RULES = Path(__file__).parents[4] / "roles/prometheus/files/rules/rayvllm-alerts.yml"

RULES = """groups:
  - name: g
    rules:
      # a comment kept
      - alert: First
        expr: >-
          up == 0
          for: not-a-key
        for: 2m
        labels: {severity: warning}
      - record: job:up:sum
        expr: sum by (job) (up)
      - alert: "NoFor"
        expr: up == 0
"""


def fors(text):
    return {r.get("alert") or r["record"]: r.get("for") for g in yaml.safe_load(text)["groups"] for r in g["rules"]}


def test_the_named_alerts_get_their_duration_and_nothing_else_changes():
    out = with_for(RULES, {"First": "30s", "NoFor": "1m"})
    assert fors(out) == {"First": "30s", "job:up:sum": None, "NoFor": "1m"}
    assert "      # a comment kept\n" in out and "          for: not-a-key\n" in out
    assert [line for line in out.splitlines() if line not in RULES.splitlines()] == [
        "        for: 30s",
        "        for: 1m",
    ]


def test_no_durations_or_other_alerts_leave_the_text_as_it_is():
    assert with_for(RULES, {"Other": "5m"}) == RULES


def test_the_projects_rules_with_one_alert_set():
    text = PROJECT_RULES.read_text()
    before, after = fors(text), fors(with_for(text, {"ScrapeTargetDown": "30s"}))
    assert before["ScrapeTargetDown"] == "2m" and after == {**before, "ScrapeTargetDown": "30s"}
    assert alert_names(RULES) == ["First", "NoFor"] and "VllmDown" in alert_names(text)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("30s", True),
        ("1h30m", True),
        ("500ms", True),
        ("2m", True),
        ("0", False),
        ("", False),
        ("2 m", False),
        ("30m1h", False),
        (30, False),
    ],
)
def test_prometheus_durations(value, ok):
    assert is_duration(value) is ok
