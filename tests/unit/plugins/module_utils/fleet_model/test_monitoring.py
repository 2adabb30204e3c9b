"""The fleet model's monitoring hosts: Prometheus, Grafana and Alertmanager URLs and addresses."""

from .inventory import build, host


def test_monitoring_urls():
    hosts = {
        "h": host("10.0.0.1"),
        "mon": {"vars": {"prometheus_web_listen_address": "0.0.0.0:9091"}, "facts": {}, "ansible_host": "10.0.5.5"},
    }
    model, _problems = build(["h"], [], hosts, monitoring=["mon"])
    assert model["monitoring"] == {
        "host": "mon",
        "address": "10.0.5.5",
        "prometheus_url": "http://10.0.5.5:9091",
        "prometheus_local_url": "http://127.0.0.1:9091",
        "prometheus_scrape_interval": "15s",
        "grafana_url": "http://10.0.5.5:3000",
        "addresses": {"mon": "10.0.5.5"},
        "alertmanagers": ["10.0.5.5:9093"],
    }
    model, _problems = build(["h"], [], {"h": host("10.0.0.1")}, monitoring=["h"])
    assert model["monitoring"]["prometheus_url"] == "http://10.0.0.1:9090"
    assert build(["h"], [], {"h": host("10.0.0.1")})[0]["monitoring"]["host"] == ""


def test_every_prometheus_sends_to_every_alertmanager_and_they_gossip():
    hosts = {
        "h": host("10.0.0.1"),
        "m1": {"vars": {}, "facts": {}, "ansible_host": "10.0.5.1"},
        "m2": {"vars": {"alertmanager_web_listen_address": "0.0.0.0:9193"}, "facts": {}, "ansible_host": "10.0.5.2"},
        "m3": {"vars": {"alertmanager_install_source": "none"}, "facts": {}, "ansible_host": "10.0.5.3"},
    }
    model, problems = build(["h"], [], hosts, monitoring=["m1", "m2", "m3"])
    assert problems == []
    assert model["monitoring"]["alertmanagers"] == ["10.0.5.1:9093", "10.0.5.2:9193"]
    m1 = {(s["name"], s.get("proto", "tcp")): s for s in model["firewall"]["m1"]["services"]}
    assert m1[("Alertmanager", "tcp")] == {
        "name": "Alertmanager", "sources": ["10.0.5.1", "10.0.5.2", "10.0.5.3"], "admins": True, "ports": [9093]
    }  # fmt: skip
    for proto in ("tcp", "udp"):
        assert m1[("Alertmanager cluster", proto)]["sources"] == ["10.0.5.2", "10.0.5.3"]
        assert m1[("Alertmanager cluster", proto)]["ports"] == [9094]
    assert not any(s["name"].startswith("Alertmanager") for s in model["firewall"]["m3"]["services"])
    # One monitoring host: no gossip port is opened.
    model, _problems = build(["h"], [], hosts, monitoring=["m1"])
    assert [s["name"] for s in model["firewall"]["m1"]["services"] if s["name"].startswith("Alertmanager")] == [
        "Alertmanager"
    ]
