"""The completion probe and state files vllm-watchdog and vllm-router-health share, against a local HTTP server."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils import vllm_probe
from ansible_collections.rayvllm.fleet.plugins.module_utils import vllm_router_health as rh
from ansible_collections.rayvllm.fleet.plugins.module_utils import vllm_watchdog as wd

KEY = "sk-probe-secret"


class Server:
    """A stand-in vLLM server: ``answer`` is (status, body) or "hang"; ``seen`` keeps what reached it."""

    def __init__(self):
        self.answer, self.seen = (200, {"usage": {"completion_tokens": 1}}), []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, body):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                owner.seen.append(("GET", self.path, self.headers.get("Authorization"), None))
                self._reply(200, "vllm:generation_tokens_total 7\n")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"null")
                owner.seen.append(("POST", self.path, self.headers.get("Authorization"), body))
                if owner.answer == "hang":
                    time.sleep(1.5)
                    return
                self._reply(*owner.answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.httpd.shutdown()


def test_a_completion_with_a_token_is_ok_and_carries_the_key_in_the_header(server):
    assert vllm_probe.completion(server.url, KEY, "llama", 5) == (True, "")
    method, path, auth, body = server.seen[-1]
    assert (method, path, auth) == ("POST", "/v1/completions", "Bearer " + KEY)
    assert body == {"model": "llama", "prompt": "Hello", "max_tokens": 1, "temperature": 0}


@pytest.mark.parametrize(
    "answer, error",
    [
        ((200, {"usage": {"completion_tokens": 0}}), "HTTP 200 with 0 tokens after "),
        ((401, {"error": "Unauthorized"}), "HTTP 401 after "),
        ((500, "not json"), "HTTP 500 after "),
        ((200, "not json"), "no answer ("),
        ("hang", "no answer after "),
    ],
)
def test_what_failed_is_named_and_the_key_is_not(server, answer, error):
    server.answer = answer
    ok, message = vllm_probe.completion(server.url, KEY, "llama", 0.5)
    assert not ok and message.startswith(error), message
    assert KEY not in message


def test_a_closed_port_is_no_answer():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ok, message = vllm_probe.completion("http://127.0.0.1:%d" % port, KEY, "llama", 2)
    assert not ok and message.startswith("no answer (") and "refused" in message.lower()


def test_both_programs_probe_through_it(server):
    assert rh.probe(server.url, KEY, "llama", 5) == {"ok": True, "error": ""}
    assert wd.probe_server(server.url, KEY, "llama", 5) == {"ok": True, "error": "", "tokens": 7.0}
    assert server.seen[-1][:3] == ("GET", "/metrics", None)  # the counter is read without the key


def test_state_files_are_replaced_whole_and_read_back(tmp_path):
    path = str(tmp_path / "state.json")
    assert vllm_probe.load_json(path, {"fresh": True}) == {"fresh": True}
    vllm_probe.save(path, {"failures": 2})
    assert vllm_probe.load_json(path, None) == {"failures": 2}
    vllm_probe.save(path, "metric 1\n")
    assert (tmp_path / "state.json").read_text() == "metric 1\n" and vllm_probe.load_json(path, "bad") == "bad"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
