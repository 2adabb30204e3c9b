"""The fleet model: clusters, heads, members, addresses and the problems that stop a run."""

import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm

DEFAULTS = fm.literal_defaults(
    {role: yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text()) for role in fm.SHARED_SETTINGS}
)
PINNED = {"ray_version": "2.60.0", "vllm_version": "0.32.0"}


def facts(ip, interface="eth0", *secondaries):
    return {
        "default_ipv4": {"address": ip, "interface": interface},
        "interfaces": ["lo", interface],
        "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}},
        interface.replace("-", "_"): {
            "device": interface,
            "ipv4": {"address": ip},
            "ipv4_secondaries": [{"address": a} for a in secondaries],
        },
    }


def host(ip, cluster=None, interface="eth0", **variables):
    hvars = {**PINNED, **variables}
    if cluster is not None:
        hvars["ray_cluster_name"] = cluster
    return {"vars": hvars, "facts": facts(ip, interface)}


def build(heads, workers, hosts, monitoring=()):
    return fm.build(heads, workers, hosts, DEFAULTS, monitoring)


def test_an_inventory_without_cluster_names_is_one_cluster():
    model, problems = build(
        ["h"], ["w1", "w2"], {"h": host("10.0.0.1"), "w1": host("10.0.0.2"), "w2": host("10.0.0.3")}
    )
    assert problems == []
    assert list(model["clusters"]) == ["default"]
    cluster = model["clusters"]["default"]
    assert cluster["head"] == "h" and cluster["hosts"] == ["h", "w1", "w2"]
    assert cluster["gcs_address"] == "10.0.0.1:6379"
    assert cluster["dashboard_url"] == "http://10.0.0.1:8265"
    assert cluster["vllm_url"] == "http://10.0.0.1:8000"
    assert model["nodes"]["w2"] == {
        "cluster": "default",
        "role": "worker",
        "ip": "10.0.0.3",
        "interface": "eth0",
        "network_env": {"VLLM_HOST_IP": "10.0.0.3", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"},
        "auth_env": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/ray/auth_token"},
        "ray_auth_token_file": "/etc/ray/auth_token",
        "ray_ports": [6800, 6801, 8080, 52365, 52366, 52367],
        "settings": model["nodes"]["w2"]["settings"],
    }
    assert model["nodes"]["h"]["ray_ports"] == [6379, 6800, 6801, 8080, 8265, 10001, 52365, 52366, 52367]


def test_two_clusters_with_their_own_ports_and_gpus():
    hosts = {
        "a1": host("10.0.0.1", "a", ray_num_gpus=8),
        "a2": host("10.0.0.2", "a", ray_num_gpus=8),
        "b1": host("10.0.1.1", "b", ray_gcs_port=6380, vllm_port=8100, vllm_host="10.0.1.1"),
    }
    model, problems = build(["a1", "b1"], ["a2"], hosts)
    assert problems == []
    assert model["clusters"]["a"]["declared_gpus"] == 16 and model["clusters"]["a"]["gpus_per_node"] == [8, 8]
    assert model["clusters"]["b"]["gcs_address"] == "10.0.1.1:6380"
    assert model["clusters"]["b"]["vllm_url"] == "http://10.0.1.1:8100"
    assert model["clusters"]["b"]["gpus_per_node"] == [None]
    assert (
        model["nodes"]["b1"]["settings"]["vllm_port"] == 8100 and model["nodes"]["a1"]["settings"]["vllm_port"] == 8000
    )


def test_the_model_does_not_depend_on_the_order_the_inventory_lists_its_hosts():
    """Files rendered from the model (Prometheus' targets, the router's backends) must not change, and reload
    their service, when the same fleet comes from an inventory listing its hosts in another order."""
    hosts = {"a1": host("10.0.0.1", "a"), "a2": host("10.0.0.2", "a"), "a3": host("10.0.0.3", "a")}
    hosts["b1"] = host("10.0.1.1", "b", ray_gcs_port=6380)
    first, problems = build(["a1", "b1"], ["a2", "a3"], hosts, monitoring=["a1"])
    again, _problems = build(["b1", "a1"], ["a3", "a2"], hosts, monitoring=["a1"])
    assert problems == []
    assert json.dumps(first) == json.dumps(again)
    assert first["clusters"]["a"]["hosts"] == ["a1", "a2", "a3"]


def test_explicit_address_and_interface():
    hosts = {
        "h": {"vars": {**PINNED, "ray_node_ip": "192.168.10.1"}, "facts": facts("10.0.0.1", "eno1", "192.168.10.1")},
        "w": {"vars": {**PINNED, "ray_node_interface": "ib0"}, "facts": facts("10.0.0.2", "enp-3s0")},
    }
    model, problems = build(["h"], ["w"], hosts)
    assert problems == []
    assert (model["nodes"]["h"]["ip"], model["nodes"]["h"]["interface"]) == ("192.168.10.1", "eno1")
    assert (model["nodes"]["w"]["ip"], model["nodes"]["w"]["interface"]) == ("10.0.0.2", "ib0")
    assert model["nodes"]["w"]["network_env"]["NCCL_SOCKET_IFNAME"] == "ib0"


def test_interface_names_with_dashes_are_found():
    model, problems = build(["h"], [], {"h": {"vars": PINNED, "facts": facts("10.0.0.1", "br-data")}})
    assert problems == [] and model["nodes"]["h"]["interface"] == "br-data"


@pytest.mark.parametrize(
    ("heads", "workers", "clusters", "message"),
    [
        (["a", "b"], [], {}, "cluster 'default' has 2 heads (a, b): a Ray cluster has exactly one"),
        ([], ["a", "b"], {}, "cluster 'default' has workers (a, b) but no head"),
        (["a"], ["b"], {"b": "other"}, "cluster 'other' has workers (b) but no head"),
        (["a"], ["a", "b"], {}, "a is in both ray_head and ray_workers"),
        ([], [], {}, "The inventory has no Ray node"),
        (["a"], ["b"], {"a": "x y", "b": "x y"}, "ray_cluster_name 'x y' on a is not a usable cluster name"),
    ],
)
def test_membership_problems(heads, workers, clusters, message):
    hosts = {name: host("10.0.0.%d" % (i + 1), clusters.get(name)) for i, name in enumerate("ab")}
    _model, problems = build(heads, workers, hosts)
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize("key", fm.CLUSTER_UNIFORM)
def test_settings_that_differ_inside_a_cluster(key):
    hosts = {"a": host("10.0.0.1", "c"), "b": host("10.0.0.2", "c"), "x": host("10.0.1.1", "other")}
    hosts["b"]["vars"][key] = 1234
    _model, problems = build(["a", "x"], ["b"], hosts)
    assert len(problems) == 1, problems
    assert problems[0].startswith("cluster 'c': %s must be the same on every node, but it is " % key)
    assert "1234 on b" in problems[0] and "%s on a" % hosts["a"]["vars"].get(key, DEFAULTS.get(key)) in problems[0]
    assert problems[0].endswith("Set it once in the cluster's group_vars, not per host.")


def test_clusters_may_differ_from_each_other():
    hosts = {"a": host("10.0.0.1", "a"), "b": host("10.0.0.2", "b", ray_version="2.59.0", ray_gcs_port=7000)}
    assert build(["a", "b"], [], hosts)[1] == []


def test_an_address_on_no_interface():
    hosts = {"h": {"vars": {**PINNED, "ray_node_ip": "10.9.9.9"}, "facts": facts("10.0.0.1")}}
    _model, problems = build(["h"], [], hosts)
    assert problems == [
        "ray_node_ip 10.9.9.9 is on no interface of h (its addresses: eth0 10.0.0.1, lo 127.0.0.1): Ray, vLLM and NCCL "
        "would advertise an address nobody reaches. Set ray_node_ip to one of its addresses."
    ]


def test_two_hosts_with_one_address_across_clusters():
    hosts = {"a": host("10.0.0.1", "a"), "b": host("10.0.0.1", "b")}
    _model, problems = build(["a", "b"], [], hosts)
    assert problems == [
        "a, b share the address 10.0.0.1 (ray_node_ip): every Ray node needs its own. Set ray_node_ip per host."
    ]


def test_no_default_address():
    _model, problems = build(["h"], [], {"h": {"vars": PINNED, "facts": {"interfaces": ["lo"]}}})
    assert problems == [
        "h has no default IPv4 address: set ray_node_ip to the address it uses for the cluster network."
    ]


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


def test_shared_defaults_are_literals_in_their_roles():
    assert DEFAULTS["ray_gcs_port"] == 6379 and DEFAULTS["vllm_port"] == 8000
    with pytest.raises(ValueError, match="must be a literal"):
        fm.literal_defaults({"ray": {**{k: 1 for k in fm.SHARED_SETTINGS["ray"]}, "ray_user": "{{ x }}"}})
    with pytest.raises(ValueError, match="not declared in roles/vllm/defaults/main.yml"):
        fm.literal_defaults({"ray": {k: 1 for k in fm.SHARED_SETTINGS["ray"]}})


def test_mixed_within_clusters():
    values = {"a": "3.11.2", "b": "3.11.2", "c": "3.12.1", "d": "3.12.1"}
    clusters = {"a": "x", "b": "x", "c": "x", "d": "y"}
    assert fm.mixed_within_clusters(values, clusters, "Python ") == [
        "cluster 'x': Python 3.11.2 on a, b; Python 3.12.1 on c"
    ]


def test_roles_read_fleet_facts_not_the_head_group():
    """No role or playbook picks 'the' head from the inventory group: each cluster has its own."""
    offenders = [
        str(p.relative_to(ROOT))
        for p in list((ROOT / "roles").rglob("*.yml"))
        + list((ROOT / "roles").rglob("*.j2"))
        + list((ROOT / "playbooks").glob("*.yml"))
        if "groups['ray_head'][0]" in p.read_text() or "__ray_node_ip" in p.read_text()
    ]
    assert offenders == []
    assert Path(fm.__file__).name == "fleet_model.py"


def test_token_auth_is_explicit_and_uniform_within_a_cluster():
    model, problems = build(
        ["h1"],
        ["h2"],
        {"h1": host("10.0.0.1", ray_auth_mode="disabled", ray_config_dir="/etc/ray/"), "h2": host("10.0.0.2")},
    )
    assert model["nodes"]["h1"]["auth_env"] == {"RAY_AUTH_MODE": "disabled"}
    assert model["nodes"]["h1"]["ray_auth_token_file"] == ""
    assert model["nodes"]["h2"]["auth_env"] == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/ray/auth_token"}
    assert [p for p in problems if "ray_auth_mode" in p] == [
        "cluster 'default': ray_auth_mode must be the same on every node, but it is disabled on h1; token on h2. "
        "Set it once in the cluster's group_vars, not per host."
    ]


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


# --- routers (vllm-router in front of the clusters serving one model) ---


def routed(routers=("r",), monitoring=(), **router_vars):
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="llama"),
    }
    for r in routers:
        hosts.setdefault(r, {"vars": dict(router_vars), "facts": {}, "ansible_host": "10.0.9.%d" % (len(hosts) + 1)})
    return fm.build(["a1", "b1"], [], hosts, DEFAULTS, list(monitoring), list(routers))


def test_one_router_per_served_model_with_every_cluster_serving_it_as_backend():
    model, problems = routed()
    assert problems == []
    llama = model["routers"]["models"]["llama"]
    assert llama["port"] == 30000 and llama["metrics_port"] == 29000 and llama["instance"] == "llama"
    assert llama["backends"] == [
        {"cluster": "a", "url": "http://10.0.0.1:8000"},
        {"cluster": "b", "url": "http://10.0.1.1:8000"},
    ]
    assert llama["urls"] == {"r": "http://10.0.9.3:30000"}
    # The clusters share the routed model's key (the router passes the client's key through).
    assert model["clusters"]["a"]["router_model"] == "llama"
    assert model["clusters"]["a"]["vllm_api_key_name"] == model["clusters"]["b"]["vllm_api_key_name"] == "router/llama"
    # The routers reach the backends' vLLM port; clients reach the router port, Prometheus its metrics port.
    vllm = next(s for s in model["firewall"]["a1"]["services"] if s["name"] == "vLLM API")
    assert "10.0.9.3" in vllm["sources"]
    services = {s["name"]: s for s in model["firewall"]["r"]["services"]}
    assert services["vLLM router"]["ports"] == [30000] and services["vLLM router metrics"]["ports"] == [29000]


def test_without_a_router_group_the_clusters_keep_their_own_keys():
    model, problems = build(["a1"], [], {"a1": host("10.0.0.1", "a", model_path="/srv/models/llama-3/")})
    assert problems == [] and model["routers"]["models"] == {}
    assert model["clusters"]["a"]["served_model_name"] == "llama-3"
    assert model["clusters"]["a"]["router_model"] == "" and model["clusters"]["a"]["vllm_api_key_name"] == "a"


def test_a_router_with_no_cluster_behind_it_is_refused():
    _model, problems = fm.build([], [], {"r": {"vars": {}, "facts": {}}}, DEFAULTS, [], ["r"])
    assert any("the router group has hosts (r) but the inventory serves no model" in p for p in problems)


def test_several_models_need_a_port_each():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="qwen"),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert any("serve 2 models (llama, qwen)" in p and "router_model_ports" in p for p in problems)
    hosts["r"]["vars"]["router_model_ports"] = {"llama": {"port": 30000, "metrics_port": 29000},
                                                "qwen": {"port": 30001, "metrics_port": 29001}}  # fmt: skip
    model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == []
    assert model["routers"]["models"]["qwen"]["backends"] == [{"cluster": "b", "url": "http://10.0.1.1:8000"}]


def test_two_models_on_one_router_port_are_refused():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="qwen"),
        "r": {"vars": {"router_model_ports": {"llama": {"port": 30000, "metrics_port": 29000},
                                              "qwen": {"port": 30000, "metrics_port": 29001}}},
              "facts": {}, "ansible_host": "10.0.9.1"},
    }  # fmt: skip
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert any(
        "port 30000 on router host r is wanted by llama's router port, qwen's router port" in p for p in problems
    )


def test_a_port_for_a_model_nobody_serves_is_refused():
    _model, problems = routed(router_model_ports={"llama": {"port": 30000, "metrics_port": 29000},
                                                  "qwen": {"port": 30001, "metrics_port": 29001}})  # fmt: skip
    assert any("router_model_ports names qwen, which no cluster serves" in p for p in problems)


def test_a_router_port_taken_by_another_service_on_its_host_is_refused():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="llama", router_port=8000),
    }
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, ["a1"], ["a1", "b1"])
    assert any("router hosts disagree on router_port" in p for p in problems)
    hosts["a1"]["vars"]["router_port"] = 8000
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, ["a1"], ["a1", "b1"])
    assert any("port 8000 on router host a1 is wanted by llama's router port, vLLM" in p for p in problems)
    hosts["a1"]["vars"]["router_port"] = hosts["b1"]["vars"]["router_port"] = 9090
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, ["a1"], ["a1", "b1"])
    assert any("port 9090 on router host a1 is wanted by llama's router port, Prometheus" in p for p in problems)
