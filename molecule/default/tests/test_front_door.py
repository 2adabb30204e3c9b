"""The fleet's front door on ray-head (HAProxy at router_port): tiny-llama (clusters default and b) and tiny-chat
(cluster b only) at one URL, through the official openai client."""

import json
import urllib.error

import pytest
import testinfra
from sandbox import ROUTER_URL, bearer_request, vllm_api_key

MODELS = ["tiny-chat", "tiny-llama"]
# The openai client of ray-head's vLLM venv (vLLM depends on it), pointed at the door.
VENV_PYTHON = "/opt/vllm/current/bin/python"
CLIENT = """
import json, sys
from openai import OpenAI, NotFoundError
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0, timeout=120)
out = {"models": sorted(m.id for m in c.models.list())}
for model in out["models"]:
    done = [c.completions.create(model=model, prompt="Hello", max_tokens=2, temperature=0).usage.completion_tokens
            for _ in range(6)]
    chat = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    chunks = list(c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                            stream=True))
    out[model] = {"completions": done, "chat": chat.usage.completion_tokens, "chunks": len(chunks)}
try:
    c.completions.create(model="no-such-model", prompt="Hello", max_tokens=1)
except NotFoundError as err:
    out["unknown"] = [err.status_code, str(err)]
print(json.dumps(out))
"""


def door_host():
    return testinfra.get_host("docker://ray-head")


@pytest.fixture(scope="module")
def client_run():
    host = door_host()
    host.check_output("cat > /tmp/door_client.py <<'EOF'\n%s\nEOF" % CLIENT)
    return json.loads(host.check_output(f"{VENV_PYTHON} /tmp/door_client.py {ROUTER_URL} {vllm_api_key()}"))


def test_the_door_lists_exactly_the_models_the_fleet_serves(client_run):
    assert client_run["models"] == MODELS


@pytest.mark.parametrize("model", MODELS)
def test_each_model_completes_chats_and_streams_through_the_door(client_run, model):
    """tiny-chat is served by cluster b only: each of its requests reaches b (before the door, the router sent
    about half of them to cluster default, which answered 404)."""
    answers = client_run[model]
    assert len(answers["completions"]) == 6 and all(tokens >= 1 for tokens in answers["completions"])
    assert answers["chat"] >= 1
    assert answers["chunks"] >= 2  # a streamed answer arrives in pieces


def test_an_unknown_model_gets_the_doors_404_naming_it_and_the_served_ones(client_run):
    status, message = client_run["unknown"]
    assert status == 404
    assert 'The model "no-such-model" is not served here' in message
    assert "the fleet serves tiny-chat, tiny-llama" in message


def test_the_door_passes_the_clients_key_through():
    body = {"model": "tiny-chat", "prompt": "Hi", "max_tokens": 1}
    with pytest.raises(urllib.error.HTTPError) as err:
        bearer_request(ROUTER_URL + "/v1/completions", "not-the-key", body)
    assert err.value.code == 401


def test_the_door_runs_as_haproxy_with_a_map_line_per_model():
    host = door_host()
    assert host.service("haproxy").is_running and host.service("haproxy").is_enabled
    workers = host.check_output("ps -o user= -C haproxy").split()
    assert "haproxy" in workers, workers
    assert host.file("/etc/haproxy/rayvllm-models.map").content_string == (
        "tiny-chat router_tiny-chat\ntiny-llama router_tiny-llama\n"
    )
