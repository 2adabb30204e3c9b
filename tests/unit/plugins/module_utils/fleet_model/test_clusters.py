"""The fleet model's nodes and clusters: heads, members, addresses, settings inside a cluster."""

import json

import pytest
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm

from .inventory import DEFAULTS, PINNED, build, facts, host


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
        "serving": model["nodes"]["w2"]["serving"],
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


def test_each_cluster_names_the_file_on_its_head_that_holds_the_key():
    """vLLM's environment file on a vllm_serve cluster, the file Serve's ingress reads on a ray_serve one: the
    router, status.yml and smoke.yml read the key there."""
    hosts = {"a1": host("10.0.0.1", "a"), "b1": host("10.0.1.1", "b", vllm_serving_mode="ray_serve")}
    model, problems = build(["a1", "b1"], [], hosts)
    assert problems == []
    assert model["clusters"]["a"]["api_key_file"] == "/etc/vllm/vllm.env"
    assert model["clusters"]["b"]["api_key_file"] == "/etc/ray/serve_api_key"
    # Moved in the inventory (ray_serve_api_key_file): the role writes it there, and the readers look there.
    hosts["b1"] = host("10.0.1.1", "b", vllm_serving_mode="ray_serve", ray_serve_api_key_file="/srv/keys/serve")
    model, problems = build(["a1", "b1"], [], hosts)
    assert problems == [] and model["clusters"]["b"]["api_key_file"] == "/srv/keys/serve"
    # One path for the whole cluster: the Serve config names it, and replicas read it on any node.
    hosts["b2"] = host("10.0.1.2", "b", vllm_serving_mode="ray_serve")
    _model, problems = build(["a1", "b1"], ["b2"], hosts)
    assert any("ray_serve_api_key_file must be the same on every node" in p for p in problems), problems


def test_a_ray_serve_cluster_serves_its_models_and_the_router_asks_for_one_of_them():
    serve = {"vllm_serving_mode": "ray_serve", "model_path": "/srv/models/tiny-llama"}
    models = [{"name": "tiny-chat"}, {"name": "tiny-llama"}]
    hosts = {"a1": host("10.0.0.1", "a"), "b1": host("10.0.1.1", "b", **serve, ray_serve_models=models)}
    model, problems = build(["a1", "b1"], [], hosts)
    assert problems == []
    b = model["clusters"]["b"]
    assert (b["served_model_name"], b["served_models"]) == ("tiny-llama", ["tiny-chat", "tiny-llama"])
    assert model["clusters"]["a"]["served_models"] == [model["clusters"]["a"]["served_model_name"]]
    # Not one of its models: the first one, or a problem when the inventory names another.
    hosts["b1"] = host("10.0.1.1", "b", **{**serve, "model_path": "/srv/models/x"}, ray_serve_models=models)
    model, problems = build(["a1", "b1"], [], hosts)
    assert problems == [] and model["clusters"]["b"]["served_model_name"] == "tiny-chat"
    hosts["b1"] = host("10.0.1.1", "b", **serve, ray_serve_models=models, vllm_served_model_name="other")
    _model, problems = build(["a1", "b1"], [], hosts)
    assert problems == [
        "cluster 'b' serves tiny-chat, tiny-llama through Ray Serve LLM (ray_serve_models) but vllm_served_model_name "
        "is other: the router and status.yml ask the cluster for it. Set vllm_served_model_name to one of its models, "
        "or leave it unset (the first model then)."
    ]


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
        "w": {"vars": {**PINNED, "ray_node_interface": "ib0"}, "facts": facts("10.0.0.2", "ib0")},
    }
    model, problems = build(["h"], ["w"], hosts)
    assert problems == []
    assert (model["nodes"]["h"]["ip"], model["nodes"]["h"]["interface"]) == ("192.168.10.1", "eno1")
    assert (model["nodes"]["w"]["ip"], model["nodes"]["w"]["interface"]) == ("10.0.0.2", "ib0")
    assert model["nodes"]["w"]["network_env"]["NCCL_SOCKET_IFNAME"] == "ib0"


def test_an_interface_the_host_lacks_or_that_does_not_hold_the_address():
    hosts = {
        "h": {"vars": {**PINNED, "ray_node_interface": "ib9"}, "facts": facts("10.0.0.1", "eno1")},
        "w": {"vars": {**PINNED, "ray_node_interface": "lo"}, "facts": facts("10.0.0.2", "eno1")},
    }
    _model, problems = build(["h"], ["w"], hosts)
    assert any(
        p.startswith("ray_node_interface 'ib9' on h is not an interface of the host with an IPv4 address (those: ")
        for p in problems
    ), problems
    assert "ray_node_ip 10.0.0.2 is not on ray_node_interface lo of w (whose addresses are 127.0.0.1)" in " ".join(
        problems
    ), problems


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
    # 1234 as the bottom of b's worker range also puts b's other ports inside it: named separately.
    problems = [p for p in problems if "lies in Ray's worker port range" not in p]
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


def test_each_node_names_its_serving_mode_what_the_mode_asks_venv_and_compile_cache_once():
    """The serving interface's dispatcher, both modes and the roles around them read these (roles/serving): the mode
    resolved (the vllm role's default where the inventory sets none), its row of the table of modes (the roles never
    branch on the mode's name), its own models, the venv of the pinned versions, its python."""
    models = [{"name": "tiny-chat", "model_path": "/srv/models/tiny-chat"}]
    hosts = {
        "h": host("10.0.0.1", "a"),
        "s": host("10.0.0.2", "b", vllm_serving_mode="ray_serve", vllm_version="0.27.0", ray_serve_models=models),
    }
    model, problems = build(["h", "s"], [], hosts)
    assert problems == []
    root = DEFAULTS["vllm_install_root"]
    assert model["nodes"]["h"]["serving"] == {
        "mode": "vllm_serve",
        "role": "rayvllm.fleet.vllm",
        "checks": "",
        "ray_extras": [],
        "venv_requirements": [],
        "ray_environment": {},
        "model_path": True,
        "models": [],
        "stage": False,
        "watchdog": True,
        "vllm_port_metrics": True,
        "venv": "%s/%s-ray%s" % (root, PINNED["vllm_version"], PINNED["ray_version"]),
        "python": "%s/%s-ray%s/bin/python" % (root, PINNED["vllm_version"], PINNED["ray_version"]),
        "compile_cache_dir": DEFAULTS["ray_temp_dir"] + "/compile-cache/torchinductor",
    }
    serving = model["nodes"]["s"]["serving"]
    assert serving["mode"] == "ray_serve" and serving["role"] == serving["checks"] == "rayvllm.fleet.ray_serve"
    assert serving["ray_extras"] == ["serve"] and "pyarrow>=17.0.0" in serving["venv_requirements"]
    assert serving["ray_environment"] == {"RAY_num_workers_soft_limit": "0"}
    assert serving["models"] == models and not serving["model_path"] and not serving["watchdog"] and serving["stage"]
    assert not serving["vllm_port_metrics"]
    assert serving["python"] == "%s/0.27.0-ray%s/bin/python" % (root, PINNED["ray_version"])
    # Each node has its own copy: changing one (as a template's combine would not) leaves the table as it is.
    serving["ray_extras"].append("x")
    assert build(["h", "s"], [], hosts)[0]["nodes"]["s"]["serving"]["ray_extras"] == ["serve"]
