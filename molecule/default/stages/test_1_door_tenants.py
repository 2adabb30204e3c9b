"""Tenants at the front door on the converged sandbox (router_tenants through playbooks/router.yml): their keys,
models and limits (tokens per minute read from vLLM's real answers), the audit log, their metrics in Prometheus, a
revoked key, and no failed request for the others while the tenants change. Each run ends with the tenants removed
again (the door as deployed)."""

import json
import urllib.error
from pathlib import Path

import testinfra
from sandbox import (
    INVENTORY,
    ROUTER_URL,
    CompletionPoller,
    api,
    bearer_request,
    complete,
    playbook,
    vllm_api_key,
    wait_for,
)

KEY_B = "team-b-key-0123456789abcdef"  # team-a's is generated beside the inventory
KEY_C = "team-c-key-0123456789abcdef"
TENANTS = [
    {"name": "team-a"},
    {"name": "team-b", "key": KEY_B, "models": ["tiny-chat"], "requests_per_minute": 4},
    # A few completions of 2 tokens (and their prompts) a minute.
    {"name": "team-c", "key": KEY_C, "tokens_per_minute": 12},
]


def router_yml(tenants, **more):
    rc, out = playbook("playbooks/router.yml", "-e", json.dumps({"router_tenants": tenants, **more}))
    assert rc == 0, out[-3000:]
    return out


def status(key, model="tiny-chat", path="/v1/completions"):
    """(HTTP status, error message or None) of one request to the door."""
    body = {"model": model, "prompt": "Hi", "max_tokens": 1} if path != "/v1/models" else None
    try:
        answer = bearer_request(ROUTER_URL + path, key, body, timeout=60)
        return 200, answer
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}").get("error", {}).get("message")


def test_tenants_get_their_keys_models_and_limits_and_a_revoked_key_is_refused():
    door = testinfra.get_host("docker://ray-head")
    try:
        # Tenants added while a client with the clusters' key keeps asking: it sees no failed request.
        with CompletionPoller(url=ROUTER_URL) as poll:
            out = router_yml(TENANTS)
        assert poll.report()["failed"] == 0, poll.report()
        assert "the tenants at the door (team-a, team-b" in out
        key_a = (Path(INVENTORY) / "credentials/tenants/team-a/api_key").read_text().strip()
        assert len(key_a) >= 32
        # The hosts hold digests, never a tenant's key.
        tenant_map = door.file("/etc/haproxy/rayvllm-tenants.map").content_string
        assert key_a not in tenant_map and KEY_B not in tenant_map
        keys_map = door.file("/etc/haproxy/rayvllm-keys.map")
        assert keys_map.mode == 0o600 and keys_map.user == "root"

        # team-a: every model; team-b: tiny-chat only, 4 requests a minute.
        models = bearer_request(ROUTER_URL + "/v1/models", key_a)["data"]
        assert sorted(m["id"] for m in models) == ["tiny-chat", "tiny-llama"]
        assert [m["id"] for m in bearer_request(ROUTER_URL + "/v1/models", KEY_B)["data"]] == ["tiny-chat"]
        assert complete(url=ROUTER_URL, key=key_a) >= 1 and complete(url=ROUTER_URL, key=key_a, model="tiny-chat") >= 1
        code, message = status(KEY_B, "tiny-llama")
        assert code == 403 and message == 'The tenant team-b may not use the model "tiny-llama": it may use tiny-chat.'
        codes = [status(KEY_B)[0] for _request in range(5)]
        assert codes[:4] == [200] * 4 and codes[4] == 429, codes
        code, message = status(KEY_B)
        assert code == 429 and "over its limit of 4 requests per minute" in message
        assert complete(url=ROUTER_URL, key=key_a) >= 1  # the other tenant is not limited

        # team-c: its tokens, read from vLLM's answers (usage) by the door, reach its limit within a few requests.
        codes = [status(KEY_C, "tiny-llama") for _request in range(8)]
        refused = next((i for i, (code, _message) in enumerate(codes) if code == 429), None)
        assert refused is not None and refused >= 1 and all(c == 200 for c, _m in codes[:refused]), codes
        assert "over its limit of 12 tokens per minute: retry after" in codes[refused][1]

        # Prometheus has each tenant's requests by status and its tokens (job front_door).
        def scraped():
            found = {
                (r["metric"]["tenant"], r["metric"]["code"]): float(r["value"][1])
                for r in api("query", query='rayvllm_door_requests_total{job="front_door"}')["result"]
            }
            tokens = api("query", query='sum by (tenant) (rayvllm_door_tokens_total{job="front_door"})')["result"]
            spent = {r["metric"]["tenant"]: float(r["value"][1]) for r in tokens}
            wanted = [("team-b", "403"), ("team-b", "429"), ("team-c", "429"), ("team-a", "200")]
            return (found, spent) if all(found.get(k) for k in wanted) and spent.get("team-c", 0) >= 12 else None

        found, spent = wait_for(scraped, timeout=90, interval=5)
        assert found[("team-b", "429")] >= 2 and spent["team-a"] > 0, (found, spent)

        # The audit log: a line per request, tenant and model, the tokens of vLLM's answers, never a key or a prompt.
        journal = door.check_output("journalctl -u haproxy --no-pager -n 1000 -o cat")
        lines = [json.loads(line) for line in journal.splitlines() if line.startswith('{"time"')]
        assert {"tenant": "team-b", "model": "tiny-llama", "status": 403} in [
            {k: line[k] for k in ("tenant", "model", "status")} for line in lines
        ]
        answered = [
            line for line in lines if line["tenant"] == "team-a" and line["status"] == 200 and line["model"] != "-"
        ]
        assert answered and all(line["prompt_tokens"] > 0 and line["completion_tokens"] > 0 for line in answered), (
            answered[-3:]
        )
        assert key_a not in journal and KEY_B not in journal and vllm_api_key() not in journal

        # A second run changes nothing.
        out = router_yml(TENANTS)
        assert "changed=0" in out.split("PLAY RECAP")[-1], out[-2000:]

        # Only tenants' keys: the clusters' key is refused by the door itself.
        router_yml(TENANTS, router_door_cluster_keys=False)
        code, message = status(vllm_api_key())
        assert code == 401 and "needs the key of a tenant" in message

        # team-b revoked while team-a keeps asking: team-a sees no failed request, team-b's key is refused at once.
        with CompletionPoller(url=ROUTER_URL, key=key_a) as poll:
            router_yml(TENANTS[:1], router_door_cluster_keys=False)
        assert poll.report()["failed"] == 0, poll.report()
        assert status(KEY_B)[0] == 401
    finally:
        out = router_yml([])
    assert not door.file("/etc/haproxy/rayvllm-tenants.map").exists
    assert not door.file("/etc/haproxy/rayvllm-keys.map").exists
    assert complete(url=ROUTER_URL) >= 1  # the clusters' key works at the door again
