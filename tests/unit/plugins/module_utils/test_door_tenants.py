"""Tenants at the front door: their checks, the map the door reads (digests, never keys) and the HAProxy rules.
The door's behaviour on a real HAProxy: tests/integration/test_front_door_tenants.py."""

import hashlib

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import door_tenants as dt
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners import front_door as fd

SERVED = ["tiny-chat", "tiny-llama"]
KEY_A, KEY_B = "a" * 16 + "-key-of-team-a", "b" * 16 + "-key-of-team-b"


def tenant(name="team-a", key=KEY_A, **more):
    return {"name": name, "key": key, **more}


def test_usable_tenants_have_no_problems():
    tenants = [tenant(), tenant("team-b", KEY_B, models=["tiny-chat"], requests_per_minute=60, max_in_flight=4)]
    assert dt.problems(tenants, SERVED) == []


@pytest.mark.parametrize(
    ("tenants", "expected"),
    [
        ({"name": "a"}, "router_tenants must be a list of tenants"),
        (["team-a"], "router_tenants[0] must be a dict"),
        ([tenant("Team A")], "router_tenants[0]: name 'Team A' is not a tenant name"),
        ([tenant(), tenant(key=KEY_B)], "tenant team-a (router_tenants[1]): the name is given twice"),
        ([tenant(limit=3)], "tenant team-a (router_tenants[0]): unknown option(s) limit"),
        ([tenant(key="short")], "tenant team-a (router_tenants[0]): its key is not usable (the value is not shown)"),
        (
            [tenant(models=["tiny-lama"])],
            "the model 'tiny-lama' is not served by the fleet (it serves tiny-chat, tiny-llama)",
        ),
        ([tenant(requests_per_minute=-1)], "requests_per_minute is -1: a whole number"),
        ([tenant(max_in_flight=True)], "max_in_flight is True: a whole number"),
        ([tenant(tokens_per_minute="1k")], "tokens_per_minute is '1k': a whole number"),
        ([tenant(), tenant("team-b", KEY_A)], "tenants team-a, team-b have the same key (not shown)"),
    ],
)
def test_each_unusable_tenant_is_named_with_the_fix(tenants, expected):
    found = dt.problems(tenants, SERVED)
    assert any(expected in p for p in found), found
    assert not any(KEY_A in p or "short" in p for p in found)  # never a key


def test_the_map_holds_digests_grants_limits_and_lists_never_a_key():
    tenants = [tenant(), tenant("team-b", KEY_B, models=["tiny-chat"], requests_per_minute=60, tokens_per_minute=900)]
    text = dt.tenant_map(tenants, SERVED)
    assert KEY_A not in text and KEY_B not in text
    lines = text.splitlines()
    assert "%s team-a" % hashlib.sha256(KEY_A.encode()).hexdigest() in lines
    assert {"team-a@tiny-chat 1", "team-a@tiny-llama 1", "team-b@tiny-chat 1"} <= set(lines)
    assert "team-b@tiny-llama 1" not in lines
    assert {"team-a.rpm 0", "team-a.inflight 0", "team-b.rpm 60", "team-b.inflight 0"} <= set(lines)
    assert {"team-a.tpm 0", "team-b.tpm 900"} <= set(lines)
    assert "team-b.models " + dt.models_body(["tiny-chat"]) in lines
    assert "team-b.names tiny-chat" in lines and "team-a.names tiny-chat, tiny-llama" in lines


def test_the_keys_map_gives_each_model_its_clusters_key_and_refuses_a_blank_one():
    assert dt.keys_map({"tiny-llama": "k1", "tiny-chat": "k2"}) == "tiny-chat Bearer k2\ntiny-llama Bearer k1\n"
    with pytest.raises(ValueError, match="tiny-chat router is empty or holds white space"):
        dt.keys_map({"tiny-chat": "two words"})


def test_without_tenants_the_door_passes_the_key_through_and_logs_each_request():
    cfg, _map = fd.haproxy_config({"tiny-chat": "127.0.0.1:1"}, "0.0.0.0:8080", "/m")
    assert "txn.tenant) req.hdr" not in cfg and "set-header Authorization" not in cfg
    assert fd.LOG_FORMAT in cfg


@pytest.mark.parametrize("cluster_keys_pass", [True, False])
def test_with_tenants_the_door_names_the_tenant_by_its_keys_digest_and_refuses_others_when_told(cluster_keys_pass):
    tenancy = {"tenant_map": "/t.map", "keys_map": "/k.map", "cluster_keys_pass": cluster_keys_pass}
    cfg, _map = fd.haproxy_config({"tiny-chat": "127.0.0.1:1"}, "0.0.0.0:8080", "/m", tenancy=tenancy)
    lines = cfg.splitlines()
    assert (
        "  http-request set-var(txn.tenant) req.hdr(authorization),word(2,' '),sha2(256),hex,lower,map(/t.map)" in lines
    )
    assert any(line.startswith("  http-request return status 401") for line in lines) is not cluster_keys_pass
    # The tenant's /v1/models comes before the fleet's; its key is replaced only after its grant and limits.
    tenant_models = next(i for i, x in enumerate(lines) if "concat(.models)" in x)
    fleet_models = next(i for i, x in enumerate(lines) if 'string \'{"object":"list"' in x)
    grant = next(i for i, x in enumerate(lines) if "status 403" in x)
    limits = [i for i, x in enumerate(lines) if "status 429" in x]
    key = next(i for i, x in enumerate(lines) if "set-header Authorization" in x)
    assert tenant_models < fleet_models < grant < min(limits) and max(limits) < key
    assert "backend door_tenants" in lines
