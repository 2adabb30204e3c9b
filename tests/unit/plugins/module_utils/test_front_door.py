"""The front door's HAProxy configuration: what it answers itself and where it sends each model."""

import json

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import front_door as fd

ROUTERS = {"tiny-llama": "127.0.0.1:30000", "org/tiny-chat": "127.0.0.1:30001"}


def config(**kwargs):
    return fd.haproxy_config(ROUTERS, "0.0.0.0:8080", "/etc/haproxy/models.map", **kwargs)


def test_models_are_listed_in_openai_shape_sorted():
    body = json.loads(fd.models_body(ROUTERS))
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["org/tiny-chat", "tiny-llama"]
    assert all(m["object"] == "model" for m in body["data"])


def test_each_model_has_its_backend_and_map_line():
    cfg, mapping = config()
    assert mapping == "org/tiny-chat router_org-tiny-chat\ntiny-llama router_tiny-llama\n"
    assert "backend router_tiny-llama\n  server router 127.0.0.1:30000\n" in cfg
    assert "backend router_org-tiny-chat\n  server router 127.0.0.1:30001\n" in cfg
    assert "  bind 0.0.0.0:8080\n" in cfg
    assert "map(/etc/haproxy/models.map)" in cfg


def test_the_buffer_holds_the_largest_body_and_a_larger_one_is_refused():
    cfg = config(max_body_bytes=1000000)[0]
    assert "  tune.bufsize %d\n" % (1000000 + fd.HEADER_ROOM) in cfg
    line = next(x for x in cfg.splitlines() if "status 413" in x)
    assert line.endswith("if METH_POST { req.body_size gt 1000000 }")
    assert "1000000 bytes" in line


def test_the_404_names_the_requested_model_and_the_served_ones():
    cfg = config()[0]
    line = next(x for x in cfg.splitlines() if "status 404" in x and "lf-string" in x)
    assert 'The model \\"%[var(txn.model),json(utf8s)]\\" is not served here' in line
    assert "the fleet serves org/tiny-chat, tiny-llama." in line


def test_the_models_list_is_answered_by_the_door():
    cfg = config()[0]
    line = next(x for x in cfg.splitlines() if "status 200" in x and "/v1/models" in x)
    assert line.endswith("if METH_GET { path /v1/models }")
    assert fd.models_body(ROUTERS) in line


@pytest.mark.parametrize("name", ["", "-lead", "has space", "quo'te", "a" * 129, 7, None])
def test_a_name_the_door_cannot_route_is_refused(name):
    assert len(fd.model_problems([name, "tiny-llama"])) == 1
    with pytest.raises(ValueError, match="cannot be routed by the front door"):
        fd.haproxy_config({name: "127.0.0.1:1"}, "0.0.0.0:8080", "/m")


@pytest.mark.parametrize("name", ["tiny-llama", "meta-llama/Llama-3.1-8B-Instruct", "qwen2.5:7b", "a@b+c"])
def test_usual_model_names_pass(name):
    assert fd.model_problems([name]) == []


def test_a_router_hosts_door_listens_at_its_url_and_sends_each_model_to_its_router_there():
    routers = {
        "door": {"port": 30000, "models": ["chat", "llama"], "urls": {"r": "http://10.0.9.1:30000"}},
        "models": {
            "chat": {"urls": {"r": "http://10.0.9.1:30001"}},
            "llama": {"urls": {"r": "http://10.0.9.1:30002"}},
        },
    }
    files = fd.door_files(routers, "r", "/etc/haproxy/rayvllm-models.map")
    cfg = files["config"]
    assert "  bind 10.0.9.1:30000" in cfg
    assert "backend router_chat\n  server router 10.0.9.1:30001" in cfg
    assert "backend router_llama\n  server router 10.0.9.1:30002" in cfg
    assert files["map"] == "chat router_chat\nllama router_llama\n"
    # Its worker drops root; the door answers its own liveness check.
    assert "  user haproxy\n  group haproxy\n" in cfg
    assert "string ok if { path /health }" in cfg


def test_a_door_of_another_host_is_an_error_naming_it():
    with pytest.raises(KeyError):
        fd.door_files({"door": {"urls": {}}, "models": {}}, "r", "/m")


@pytest.mark.parametrize(
    ("tenancy", "refusals"),
    [(None, 3), ({"tenant_map": "/t.map", "keys_map": "/k.map", "cluster_keys_pass": False}, 8)],
)
def test_every_answer_is_counted_by_the_doors_lua_and_its_own_refusals_just_before_they_are_returned(tenancy, refusals):
    lines = config(lua_path="/l.lua", tenancy=tenancy)[0].splitlines()
    assert "  lua-load /l.lua" in lines and "  nbthread 1" in lines  # its Lua filter fails on several threads
    assert "  filter lua.rayvllm_usage" in lines and "  http-request lua.door_begin" in lines
    door = lines[: lines.index("backend elsewhere")]  # the frontend's rules
    found = [i for i, line in enumerate(door) if line.startswith("  http-request return status 4")]
    # 413, 400, 404; with tenants 401, 403 and three 429s (requests, in flight, tokens) too.
    assert len(found) == refusals
    for i in found:
        status, condition = lines[i].split()[3], lines[i].rsplit(" if ", 1)[1]
        assert lines[i - 1] == "  http-request lua.door_answer %s if %s" % (status, condition), lines[i]


def test_the_metrics_frontend_serves_the_luas_page_only_where_asked():
    assert "door_metrics" not in config()[0]
    cfg = config(metrics_bind="10.0.9.1:29999")[0]
    block = cfg.split("frontend door_metrics\n", 1)[1].split("\n\n", 1)[0]
    assert block.splitlines() == [
        "  bind 10.0.9.1:29999",
        "  no log",
        "  http-request use-service lua.door_metrics if { path /metrics }",
        "  http-request return status 404",
    ]


def test_a_tenant_over_its_tokens_per_minute_is_refused_with_the_seconds_the_lua_computed():
    tenancy = {"tenant_map": "/t.map", "keys_map": "/k.map"}
    lines = config(tenancy=tenancy)[0].splitlines()
    known = "{ var(txn.tenant) -m found }"
    check = lines.index("  http-request lua.door_tokens_limit if %s { var(txn.tpm) -m int gt 0 }" % known)
    refusal = lines[check + 2]
    assert refusal.startswith("  http-request return status 429 content-type application/json hdr Retry-After "
                              "%[var(txn.tpm_retry)] lf-string")  # fmt: skip
    assert "tokens per minute: retry after %[var(txn.tpm_retry)] s." in refusal
    assert refusal.endswith("if %s { var(txn.tpm_over) -m found }" % known)
    # Before the clusters' key replaces the tenant's: a refused request never reaches a router.
    assert check < next(i for i, x in enumerate(lines) if "set-header Authorization" in x)
