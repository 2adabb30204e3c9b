import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT, FakeClock

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients import vllm_client
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.vllm_client import VllmError

KEY = "sk-SECRET-4f9a2c71"
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


class FakeVllm:
    """A fake vLLM OpenAI-compatible server on 127.0.0.1 (a real HTTP server in a thread)."""

    def __init__(self):
        self.health_failures = 0  # the first N GET /health answer 503
        self.models_failures = 0  # the first N GET /v1/models answer 503
        self.required_key = None  # /v1/* answer 401 unless "Authorization: Bearer <required_key>"
        self.echo_auth = False  # error bodies repeat the Authorization header (a careless server)
        self.served = [MODEL]
        self.completion_tokens = 4
        self.hang_completions = False
        self.calls = []  # (method, path, Authorization header or None)
        self.bodies = []  # JSON bodies of POST /v1/completions
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, payload):
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def authorized(self):
                auth = self.headers.get("Authorization")
                if fake.required_key is None or auth == "Bearer %s" % fake.required_key:
                    return True
                error = {"error": "Unauthorized"}
                if fake.echo_auth:
                    error["received"] = auth
                self.answer(401, error)
                return False

            def do_GET(self):
                fake.calls.append(("GET", self.path, self.headers.get("Authorization")))
                if self.path == "/health":
                    if fake.count("GET", "/health") <= fake.health_failures:
                        self.answer(503, b"")
                    else:
                        self.answer(200, b"")
                elif self.path == "/v1/models":
                    if not self.authorized():
                        return
                    if fake.count("GET", "/v1/models") <= fake.models_failures:
                        error = {"error": "engine not ready"}
                        if fake.echo_auth:
                            error["received"] = self.headers.get("Authorization")
                        self.answer(503, error)
                        return
                    self.answer(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.served]})
                else:
                    self.answer(404, {"detail": "Not Found"})

            def do_POST(self):
                fake.calls.append(("POST", self.path, self.headers.get("Authorization")))
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path != "/v1/completions":
                    self.answer(404, {"detail": "Not Found"})
                    return
                fake.bodies.append(body)
                if not self.authorized():
                    return
                if fake.hang_completions:
                    fake.release.wait(10)
                    return
                tokens = fake.completion_tokens
                self.answer(
                    200,
                    {
                        "object": "text_completion",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "text": " Paris" if tokens else "", "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def count(self, method, path):
        return sum(1 for m, p, _auth in self.calls if (m, p) == (method, path))

    def auth_headers(self):
        return [auth for _method, _path, auth in self.calls]


@pytest.fixture
def fake():
    server = FakeVllm()
    server.thread.start()
    yield server
    server.release.set()
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def closed_url():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return "http://127.0.0.1:%d" % port


def wait(fake, api_key="", model=MODEL, timeout=60, interval=5, fc=None, **kwargs):
    fc = fc or FakeClock()
    return vllm_client.wait_ready(
        fake.url, api_key, model, "The capital of France is", 4, timeout, interval=interval,
        request_timeout=2, clock=fc.clock, sleep=fc.sleep, **kwargs,
    )  # fmt: skip


def assert_no_key(*texts):
    for text in texts:
        assert KEY not in str(text)


# --- the single calls


def test_health_status_and_unreachable(fake, closed_url):
    fake.health_failures = 1
    assert vllm_client.get_health(fake.url, 2) == 503
    assert vllm_client.get_health(fake.url + "/", 2) == 200
    assert vllm_client.get_health(closed_url, 2) == 0


def test_list_models_and_trailing_v1_ignored(fake):
    fake.served = ["a", "b"]
    assert vllm_client.list_models(fake.url + "/v1/", "", 2) == ["a", "b"]


def test_list_models_http_error_has_status_and_excerpt(fake):
    fake.models_failures = 1
    with pytest.raises(VllmError) as err:
        vllm_client.list_models(fake.url, "", 2)
    assert err.value.status == 503
    assert "HTTP 503" in str(err.value) and "engine not ready" in str(err.value)


def test_list_models_unreachable_is_status_0(closed_url):
    with pytest.raises(VllmError) as err:
        vllm_client.list_models(closed_url, KEY, 2)
    assert err.value.status == 0 and "no answer" in str(err.value)
    assert_no_key(err.value)


def test_complete_request_and_result(fake):
    fake.required_key = KEY
    result = vllm_client.complete(fake.url, KEY, MODEL, "Hello", 3, 5)
    assert result["completion_tokens"] == 4 and result["text"] == " Paris"
    assert isinstance(result["seconds"], float) and result["seconds"] >= 0
    assert fake.bodies == [{"model": MODEL, "prompt": "Hello", "max_tokens": 3, "temperature": 0}]
    assert fake.auth_headers() == ["Bearer %s" % KEY]


def test_complete_zero_tokens_fails(fake):
    fake.completion_tokens = 0
    with pytest.raises(VllmError, match="0 completion tokens"):
        vllm_client.complete(fake.url, "", MODEL, "Hello", 3, 5)


def test_complete_hanging_server_times_out(fake):
    fake.hang_completions = True
    with pytest.raises(VllmError) as err:
        vllm_client.complete(fake.url, KEY, MODEL, "Hello", 3, 0.3)
    assert err.value.status == 0 and "timed out" in str(err.value)
    assert_no_key(err.value)


# --- wait_ready


def test_ready_after_health_503s(fake):
    fake.health_failures = 2
    lines = []
    fc = FakeClock()
    result = wait(fake, fc=fc, log=lines.append)
    assert result["health_wait_s"] == 10.0 and fc.sleeps == [5, 5]
    assert result["completion_tokens"] == 4 and result["models"] == [MODEL]
    assert isinstance(result["completion_s"], float)
    assert set(result) == {"health_wait_s", "completion_tokens", "completion_s", "models"}
    assert [(m, p) for m, p, _auth in fake.calls] == [
        ("GET", "/health"),
        ("GET", "/health"),
        ("GET", "/health"),
        ("GET", "/v1/models"),
        ("POST", "/v1/completions"),
    ]
    assert any("/health" in line for line in lines) and any("token" in line for line in lines)


def test_key_sent_only_when_set(fake):
    wait(fake, api_key="")
    assert fake.auth_headers() == [None, None, None]
    fake.calls.clear()
    fake.required_key = KEY
    result = wait(fake, api_key=KEY)
    # /health never gets the key; /v1/models and /v1/completions do
    assert fake.auth_headers() == [None, "Bearer %s" % KEY, "Bearer %s" % KEY]
    assert_no_key(result)


def test_wrong_key_fails_at_once_naming_the_key_not_its_value(fake):
    fake.required_key = "the-right-one"
    fake.echo_auth = True
    lines = []
    with pytest.raises(VllmError) as err:
        wait(fake, api_key=KEY, log=lines.append)
    msg = str(err.value)
    assert "API key was refused" in msg and "401" in msg and "model check failed" in msg
    assert err.value.status == 401
    assert fake.count("GET", "/v1/models") == 1
    assert_no_key(msg, *lines)


def test_missing_key_says_so(fake):
    fake.required_key = KEY
    with pytest.raises(VllmError, match="requires an API key and api_key is empty"):
        wait(fake, api_key="")


def test_model_missing_lists_served_ids(fake):
    fake.served = ["llama-a", "llama-b"]
    with pytest.raises(VllmError) as err:
        wait(fake, api_key=KEY, model="qwen")
    msg = str(err.value)
    assert "model qwen missing" in msg and "llama-a, llama-b" in msg
    assert fake.count("GET", "/v1/models") == 1 and fake.count("POST", "/v1/completions") == 0
    assert_no_key(msg)


def test_models_5xx_retried_then_ready(fake):
    fake.models_failures = 2
    fake.echo_auth = True
    fake.required_key = KEY
    fc = FakeClock()
    lines = []
    result = wait(fake, api_key=KEY, fc=fc, log=lines.append)
    assert result["completion_tokens"] == 4
    assert fake.count("GET", "/v1/models") == 3 and fc.sleeps == [5, 5]
    assert_no_key(result, *lines)


def test_models_5xx_gives_up_with_last_status(fake):
    fake.models_failures = 100
    fake.echo_auth = True
    fake.required_key = KEY
    with pytest.raises(VllmError) as err:
        wait(fake, api_key=KEY, timeout=3600)
    msg = str(err.value)
    assert "model check failed after %d attempt(s)" % vllm_client.MODEL_ATTEMPTS in msg
    assert "last status: 503" in msg and err.value.status == 503
    assert vllm_client.REDACTED in msg  # the server echoed the header; the key is scrubbed
    assert_no_key(msg)


def test_health_never_200_says_seconds_and_last_status(fake):
    fake.health_failures = 10**6
    fc = FakeClock()
    with pytest.raises(VllmError) as err:
        wait(fake, api_key=KEY, timeout=20, interval=5, fc=fc)
    msg = str(err.value)
    assert "health never 200 after 20s" in msg and "last status: 503" in msg
    assert fc.sleeps == [5, 5, 5, 5]
    assert fake.count("GET", "/v1/models") == 0
    assert_no_key(msg)


def test_a_server_that_exited_stops_the_wait_at_once(closed_url):
    fc = FakeClock()
    answers = iter([None, None, "vllm.service failed (exit status 2, result exit-code)"])
    with pytest.raises(VllmError) as err:
        vllm_client.wait_ready(
            closed_url,
            KEY,
            MODEL,
            "p",
            4,
            900,
            interval=5,
            clock=fc.clock,
            sleep=fc.sleep,
            exited=lambda: next(answers),
        )
    msg = str(err.value)
    assert "the server exited before it answered /health (after 10s)" in msg and "exit status 2" in msg
    assert fc.sleeps == [5, 5]  # not the 900 s timeout


def test_health_unreachable_says_no_answer(closed_url):
    fc = FakeClock()
    with pytest.raises(VllmError) as err:
        vllm_client.wait_ready(closed_url, KEY, MODEL, "p", 4, 7, interval=5, clock=fc.clock, sleep=fc.sleep)
    msg = str(err.value)
    assert "health never 200 after 7s" in msg and "last status: 0, no answer" in msg
    assert fc.sleeps == [5, 2]
    assert_no_key(msg)


def test_completion_zero_tokens_fails_the_wait(fake):
    fake.completion_tokens = 0
    fake.required_key = KEY
    with pytest.raises(VllmError) as err:
        wait(fake, api_key=KEY)
    msg = str(err.value)
    assert "completion failed" in msg and "0 completion tokens" in msg and "last status: 200" in msg
    assert_no_key(msg)


def test_completion_timeout_is_time_left_but_at_least_30s(fake, monkeypatch):
    seen = []

    def fake_complete(url, api_key, model, prompt, max_tokens, timeout, opener=None):
        seen.append(timeout)
        return {"completion_tokens": 1, "text": "x", "seconds": 0.1}

    monkeypatch.setattr(vllm_client, "complete", fake_complete)
    fake.health_failures = 1
    wait(fake, timeout=100, interval=5)
    wait(fake, timeout=10, interval=5)
    assert seen == [95.0, 30.0]


# --- the module: the key stays out of what Ansible prints


def run_module(args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "plugins" / "modules" / "vllm_ready.py")],
        input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc, json.loads(proc.stdout)


def test_module_ready_and_key_masked(fake):
    pytest.importorskip("ansible")
    fake.required_key = KEY
    proc, result = run_module({"url": fake.url, "api_key": KEY, "model": MODEL, "timeout": 30, "interval": 0.1})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["changed"] is False and result["completion_tokens"] == 4 and result["models"] == [MODEL]
    assert {"health_wait_s", "completion_s", "elapsed_s"} <= set(result)
    assert result["invocation"]["module_args"]["api_key"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert_no_key(proc.stdout, proc.stderr)


def test_module_failure_has_url_and_model_and_no_key(fake):
    pytest.importorskip("ansible")
    fake.required_key = "the-right-one"
    fake.echo_auth = True
    proc, result = run_module({"url": fake.url, "api_key": KEY, "model": MODEL, "timeout": 30, "interval": 0.1})
    assert proc.returncode == 1 and result["failed"] is True
    assert "API key was refused" in result["msg"]
    assert result["url"] == fake.url and result["model"] == MODEL
    assert_no_key(proc.stdout, proc.stderr)
