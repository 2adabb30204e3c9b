"""The fleet model's firewall exposure: who, outside a host's cluster, reaches which of its ports."""

from .inventory import build, host


def test_fleet_model_exposure_of_a_head_a_worker_and_a_monitoring_host():
    model, problems = build(
        ["h"],
        ["w"],
        {
            "h": host("10.0.0.1", vllm_allowed_cidrs=["192.0.2.0/24"]),
            "w": host("10.0.0.2"),
            "mon": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.9"},
        },
        monitoring=["mon"],
    )
    assert problems == []
    fw = model["firewall"]
    assert fw["h"]["members"] == ["10.0.0.2"] and fw["w"]["members"] == ["10.0.0.1"]
    by_name = {s["name"]: s for s in fw["h"]["services"]}
    assert by_name["vLLM API"]["sources"] == ["10.0.9.9", "192.0.2.0/24"]
    assert by_name["Ray dashboard"] == {"name": "Ray dashboard", "ports": [8265], "sources": [], "admins": True}
    assert by_name["Ray head metrics"]["ports"] == [44217, 44227]
    assert {s["name"] for s in fw["w"]["services"]} == {"node exporter", "Ray metrics", "DCGM exporter"}
    mon = {s["name"]: s for s in fw["mon"]["services"]}
    assert mon["Prometheus"] == {"name": "Prometheus", "ports": [9090], "sources": ["10.0.0.1"], "admins": True}
    # The heads' dashboards query Prometheus and check Grafana's health server-side.
    assert mon["Grafana"] == {"name": "Grafana", "ports": [3000], "sources": ["10.0.0.1"], "admins": True}
    assert fw["mon"]["members"] == []


def test_the_weights_port_opens_to_the_other_clusters_nodes_only():
    # model_distribution_scope: fleet: a node of another cluster may serve a revision; the host's own cluster
    # reaches every port already, so a fleet of one cluster has no opening for it.
    model, problems = build(
        ["h", "hb"],
        ["w"],
        {
            "h": host("10.0.0.1"),
            "w": host("10.0.0.2"),
            "hb": host("10.0.1.1", ray_cluster_name="b"),
        },
    )
    assert problems == []
    fw = model["firewall"]
    sharing = {h: [s for s in fw[h]["services"] if s["name"] == "weights sharing"] for h in ("h", "w", "hb")}
    assert sharing["w"] == [{"name": "weights sharing", "ports": [29870], "sources": ["10.0.1.1"], "admins": False}]
    assert sharing["hb"][0]["sources"] == ["10.0.0.1", "10.0.0.2"]
    alone, problems = build(["h"], ["w"], {"h": host("10.0.0.1"), "w": host("10.0.0.2")})
    assert problems == [] and not [s for s in alone["firewall"]["w"]["services"] if s["name"] == "weights sharing"]
