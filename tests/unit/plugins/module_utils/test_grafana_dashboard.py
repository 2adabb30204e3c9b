import json

import pytest
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import grafana_dashboard as g

UID, NAME = "rayvllm-prometheus", "Prometheus"
DASHBOARDS = sorted((ROOT / "roles/grafana/files/dashboards").glob("*.json"))


NODE_COUNT = 'sum(autoscaler_active_nodes{SessionName=~"$SessionName"}[$__rate_interval])'


def ray_like(current=None):
    """The shape of Ray's factory output: every query goes through a ${datasource} variable."""
    variable = {"name": "datasource", "type": "datasource", "query": "prometheus", "current": current or {}}
    return {
        "uid": "rayDefaultDashboard",
        "title": "Default Dashboard",
        "annotations": {"list": [{"name": "Annotations & Alerts", "datasource": "-- Grafana --"}]},
        "templating": {
            "list": [
                variable,
                {
                    "name": "SessionName",
                    "type": "query",
                    "datasource": "${datasource}",
                    "includeAll": True,
                    "allValue": ".+",
                    "current": {"selected": False},
                },
            ]
        },
        "panels": [
            {"type": "row", "title": "Overview", "panels": [{"title": "Nested", "datasource": "${datasource}"}]},
            {
                "title": "Node Count",
                "datasource": "${datasource}",
                "targets": [{"refId": "A", "expr": NODE_COUNT}],
            },
        ],
    }


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_project_dashboards_resolve_to_the_provisioned_uid(path):
    assert g.dashboard_problems(path.read_text(), UID, NAME) == []
    assert g.panel_queries(path.read_text()), "a dashboard without queries"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_project_dashboards_fail_against_another_uid(path):
    problems = g.dashboard_problems(path.read_text(), "another-uid", "Another")
    assert problems and all("not the provisioned Prometheus (uid another-uid)" in p for p in problems)


def test_ray_style_datasource_variable_resolves():
    assert g.dashboard_problems(ray_like(), UID, NAME) == []
    assert g.dashboard_problems(ray_like({"text": NAME, "value": UID}), UID, NAME) == []


def test_datasource_variable_preset_to_another_source_is_reported():
    problems = g.dashboard_problems(ray_like({"text": "Old", "value": "old-uid"}), UID, NAME)
    assert len(problems) == 3  # the SessionName variable, the nested panel, the Node Count panel
    assert "panel 'Nested' of dashboard 'Default Dashboard'" in problems[1]


def test_unknown_variable_and_foreign_uid_are_reported():
    dashboard = ray_like()
    dashboard["panels"][1]["datasource"] = "${prom}"
    dashboard["panels"][1]["targets"][0]["datasource"] = {"type": "prometheus", "uid": "elsewhere"}
    problems = g.dashboard_problems(dashboard, UID, NAME)
    assert [p.split(" of ")[0] for p in problems] == ["panel 'Node Count'", "panel 'Node Count' target A"]


def test_missing_uid_bad_json_and_non_object():
    assert "has no uid or no title" in g.dashboard_problems({"title": "x", "panels": []}, UID)[0]
    assert g.dashboard_problems("{not json", UID)[0].startswith("not valid JSON")
    assert g.dashboard_problems("[]", UID) == ["not a dashboard: a JSON object is expected"]


def test_queries_come_out_expanded():
    queries = g.panel_queries(json.dumps(ray_like()))
    assert queries == [("Node Count", "A", 'sum(autoscaler_active_nodes{SessionName=~".+"}[1m])')]


def test_expand_forms_and_values():
    values = {"a": "x", "__rate_interval": "2m"}
    assert g.expand("${a} $a [[a]] ${a:regex} [$__rate_interval] $unknown", values) == "x x x x [2m] $unknown"
    single = {"name": "single", "current": {"value": "v1"}}
    multi = {"name": "multi", "current": {"value": ["p", "q"]}}
    dashboard = {"templating": {"list": [single, multi]}}
    values = g.variable_values(dashboard, interval="5m")
    assert values["single"] == "v1" and values["multi"] == ".*" and values["__interval"] == "5m"
