"""The fleet model's routers: one vllm-router per served model, its backends and ports."""

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm

from .inventory import DEFAULTS, build, host


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
    # The front door at router_port; the model's router on the next port, its metrics on router_metrics_port.
    assert model["routers"]["door"] == {
        "port": 30000,
        "models": ["llama"],
        "urls": {"r": "http://10.0.9.3:30000"},
        # Its per-tenant metrics, for Prometheus.
        "metrics_port": 29999,
        "metrics_urls": {"r": "http://10.0.9.3:29999"},
    }
    assert llama["port"] == 30001 and llama["metrics_port"] == 29000 and llama["instance"] == "llama"
    assert llama["backends"] == [
        {"cluster": "a", "url": "http://10.0.0.1:8000"},
        {"cluster": "b", "url": "http://10.0.1.1:8000"},
    ]
    assert llama["urls"] == {"r": "http://10.0.9.3:30001"}
    # The clusters share the routed model's key (the router passes the client's key through).
    assert model["clusters"]["a"]["router_model"] == "llama"
    assert model["clusters"]["a"]["vllm_api_key_name"] == model["clusters"]["b"]["vllm_api_key_name"] == "router/llama"
    # The routers reach the backends' vLLM port; clients reach the door and the router port, Prometheus its metrics.
    vllm = next(s for s in model["firewall"]["a1"]["services"] if s["name"] == "vLLM API")
    assert "10.0.9.3" in vllm["sources"]
    services = {s["name"]: s for s in model["firewall"]["r"]["services"]}
    assert services["front door"]["ports"] == [30000] and services["vLLM router"]["ports"] == [30001]
    assert services["vLLM router metrics"]["ports"] == [29000]


def test_without_a_router_group_the_clusters_keep_their_own_keys():
    model, problems = build(["a1"], [], {"a1": host("10.0.0.1", "a", model_path="/srv/models/llama-3/")})
    assert problems == [] and model["routers"]["models"] == {}
    assert model["clusters"]["a"]["served_model_name"] == "llama-3"
    assert model["clusters"]["a"]["router_model"] == "" and model["clusters"]["a"]["vllm_api_key_name"] == "a"


def test_a_router_with_no_cluster_behind_it_is_refused():
    _model, problems = fm.build([], [], {"r": {"vars": {}, "facts": {}}}, DEFAULTS, [], ["r"])
    assert any("the router group has hosts (r) but the inventory serves no model" in p for p in problems)


def test_several_models_share_the_door_each_router_on_ports_after_its_own():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="qwen"),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == []
    assert model["routers"]["door"]["models"] == ["llama", "qwen"]
    ports = {m: (r["port"], r["metrics_port"]) for m, r in model["routers"]["models"].items()}
    assert ports == {"llama": (30001, 29000), "qwen": (30002, 29001)}
    # router_model_ports still gives a model its own ports (clients that used them keep their URL).
    hosts["r"]["vars"]["router_model_ports"] = {"qwen": {"port": 31001, "metrics_port": 29101}}
    model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == []
    assert model["routers"]["models"]["qwen"]["backends"] == [{"cluster": "b", "url": "http://10.0.1.1:8000"}]
    assert model["routers"]["models"]["qwen"]["port"] == 31001 and model["routers"]["models"]["llama"]["port"] == 30001


def test_a_router_model_port_on_the_door_port_is_refused_saying_what_to_change():
    """An inventory written before the door, its first model on 30000 (router_port's default)."""
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="qwen"),
        "r": {"vars": {"router_model_ports": {"llama": {"port": 30000, "metrics_port": 29000},
                                              "qwen": {"port": 30001, "metrics_port": 29001}}},
              "facts": {}, "ansible_host": "10.0.9.1"},
    }  # fmt: skip
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert (
        "router_model_ports gives llama the port 30000, which is router_port: the front door listens there and serves "
        "every model, llama included, at that one URL. Remove llama from router_model_ports (its router then listens "
        "on a port of its own after the door's) or give it another port." in problems
    )


def test_every_model_of_a_ray_serve_cluster_gets_a_router():
    """A Ray Serve cluster's second model (ray_serve_models) is served through the door too, by that cluster."""
    b_models = [{"name": "llama"}, {"name": "chat"}]
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_serving_mode="ray_serve", ray_serve_models=b_models),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == []
    routers = model["routers"]["models"]
    assert sorted(routers) == ["chat", "llama"] and model["routers"]["door"]["models"] == ["chat", "llama"]
    assert [b["cluster"] for b in routers["chat"]["backends"]] == ["b"]
    assert [b["cluster"] for b in routers["llama"]["backends"]] == ["a", "b"]
    # b's key stays its routed model's (the clusters behind the llama router share it).
    assert model["clusters"]["b"]["router_model"] == "llama"
    assert model["clusters"]["b"]["vllm_api_key_name"] == "router/llama"


def test_a_model_name_the_door_cannot_route_is_refused():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama 3"),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    _model, problems = fm.build(["a1"], [], hosts, DEFAULTS, [], ["r"])
    assert any(p.startswith("the served model name 'llama 3' cannot be routed by the front door") for p in problems)


def test_two_models_on_one_router_port_are_refused():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="qwen"),
        "r": {"vars": {"router_model_ports": {"llama": {"port": 31000, "metrics_port": 29000},
                                              "qwen": {"port": 31000, "metrics_port": 29001}}},
              "facts": {}, "ansible_host": "10.0.9.1"},
    }  # fmt: skip
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert any(
        "port 31000 on router host r is wanted by llama's router port, qwen's router port" in p for p in problems
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
    assert any("port 8000 on router host a1 is wanted by front door (router_port), vLLM" in p for p in problems)
    hosts["a1"]["vars"]["router_port"] = hosts["b1"]["vars"]["router_port"] = 9090
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, ["a1"], ["a1", "b1"])
    assert any("port 9090 on router host a1 is wanted by front door (router_port), Prometheus" in p for p in problems)


def test_clusters_behind_one_router_must_share_the_api_key_and_the_message_never_shows_it():
    def keyed(a=None, b=None):
        hosts = {
            "a1": host("10.0.0.1", "a", vllm_served_model_name="llama"),
            "b1": host("10.0.1.1", "b", vllm_served_model_name="llama"),
            "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
        }
        # The filter hands the model a digest of each host's vllm_api_key, never the value.
        for name, digest in (("a1", a), ("b1", b)):
            if digest is not None:
                hosts[name]["vars"]["vllm_api_key"] = digest
        return fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])[1]

    assert keyed() == [] and keyed("d1", "d1") == []
    (different,) = [p for p in keyed("d1", "d2") if "different vLLM API keys" in p]
    assert "key 1 set in the inventory on a; key 2 set in the inventory on b" in different
    assert "Set vllm_api_key once for all of them" in different and "d1" not in different
    (one_set,) = [p for p in keyed(b="d2") if "different vLLM API keys" in p]
    assert "the default key (credentials/router/llama/vllm_api_key beside the inventory) on a" in one_set
    assert "key 1 set in the inventory on b" in one_set


def test_clusters_behind_one_router_share_their_context_length():
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama", vllm_max_model_len=4096),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="llama"),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == [
        "the clusters behind the llama router serve with different vllm_max_model_len (4096 on a; unset (the model's "
        "full context) on b): the router sends a request to any of them, so a prompt that fits one and not another "
        "would fail at random. Set vllm_max_model_len once for all of them."
    ]
    hosts["b1"]["vars"]["vllm_max_model_len"] = 4096
    assert fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])[1] == []
    # Without a router, clusters serving one model may differ.
    assert fm.build(["a1"], [], {"a1": hosts["a1"]}, DEFAULTS)[1] == []


def test_clusters_behind_one_router_start_vllm_with_the_same_api_shaping_flags():
    tools = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--enforce-eager"]
    hosts = {
        "a1": host("10.0.0.1", "a", vllm_served_model_name="llama", vllm_extra_args=tools),
        "b1": host("10.0.1.1", "b", vllm_served_model_name="llama", vllm_extra_args=["--tool_call_parser=llama3_json"]),
        "r": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    _model, problems = fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])
    assert problems == [
        "the clusters behind the llama router start vLLM with different --enable-auto-tool-choice in vllm_extra_args "
        "(given alone on a; not set on b): the router sends a request to any of them, so what a client gets back "
        "would differ at random. Give every cluster behind it the same --enable-auto-tool-choice (vllm_extra_args of "
        "their heads, e.g. in one group), or none of them.",
        "the clusters behind the llama router start vLLM with different --tool-call-parser in vllm_extra_args "
        "('hermes' on a; 'llama3_json' on b): the router sends a request to any of them, so what a client gets back "
        "would differ at random. Give every cluster behind it the same --tool-call-parser (vllm_extra_args of their "
        "heads, e.g. in one group), or none of them.",
    ]
    # Flags that do not change what a client sees may differ (--enforce-eager on a alone); the same flags written
    # differently agree.
    hosts["b1"]["vars"]["vllm_extra_args"] = ["--tool_call_parser=hermes", "--enable-auto-tool-choice"]
    assert fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])[1] == []
    # A Ray Serve cluster takes its engine settings from its applications, not vllm_extra_args.
    hosts["b1"]["vars"].update(vllm_serving_mode="ray_serve", vllm_extra_args=[])
    assert not [p for p in fm.build(["a1", "b1"], [], hosts, DEFAULTS, [], ["r"])[1] if "vllm_extra_args" in p]
    # Without a router, clusters serving one model may differ.
    assert fm.build(["a1"], [], {"a1": hosts["a1"]}, DEFAULTS)[1] == []
