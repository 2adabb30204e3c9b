import http.server
import json
import threading
import time

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils import vllm_watchdog as wd

RUNNING = {"name": "vllm.service", "active": "active", "sub": "running", "started": 1000.0}
FAIL = {"ok": False, "error": "no answer after 15.0 s", "tokens": 50.0}
OK = {"ok": True, "error": "", "tokens": 51.0}


def run(probes, start=2000.0, step=25.0, state=None, unit=None, settings=None):
    """Feed probes one every `step` s (the unit RUNNING unless given); [(action, message), ...] and the last state."""
    state, out, unit = state or wd.new_state(), [], RUNNING if unit is None else unit
    for i, probe in enumerate(probes):
        state, action, message = wd.decide(state, unit, probe, start + i * step, settings)
        out.append((action, message))
    return out, state


def test_three_consecutive_failures_restart_with_the_reason():
    out, state = run([OK, FAIL, FAIL, FAIL])
    assert [a for a, _message in out] == ["none", "none", "none", "restart"]
    assert out[1][1] == "probe failed (no answer after 15.0 s): 1 of 3 consecutive failures before a restart"
    assert out[3][1] == "3 consecutive completions failed over 75 s (last: no answer after 15.0 s)"
    assert state["restarts"] == 1 and state["failures"] == 0 and state["last_restart"] == 2075.0


def test_a_success_in_between_resets_the_count():
    out, _state = run([FAIL, FAIL, OK, FAIL, FAIL])
    assert "restart" not in [a for a, _message in out]
    assert out[2] == ("none", "serving again")


def test_a_slow_answer_while_tokens_are_generated_is_busy_not_hung():
    busy = [dict(FAIL, tokens=50.0 + 10 * i) for i in range(6)]
    out, state = run(busy)
    assert [a for a, _message in out] == ["none"] * 6 and state["failures"] == 0
    assert "generated 10 tokens since the last probe: busy, not hung" in out[1][1]


def test_unknown_token_counter_counts_the_failure():
    out, _state = run([dict(FAIL, tokens=None)] * 3)
    assert out[-1][0] == "restart"


def test_failures_in_the_start_grace_do_not_count_until_the_server_has_answered():
    # Started at 1000; probes at 1010.. are within the 300 s grace: loading and compiling.
    out, state = run([FAIL] * 4, start=1010.0, step=20.0)
    assert [a for a, _message in out] == ["none"] * 4 and state["failures"] == 0
    assert "not counted (start grace 300 s)" in out[0][1]
    # Once it has answered after this start, a hang inside the grace counts.
    out, _state = run([OK, FAIL, FAIL, FAIL], start=1010.0, step=20.0)
    assert out[-1][0] == "restart"


def test_restarts_that_do_not_help_back_off_exponentially():
    settings = {"backoff": 300, "backoff_max": 1000, "start_grace": 0}
    state = wd.new_state()
    actions = []
    # Probes every 25 s for 2000 s, the server never answering.
    for i in range(80):
        state, action, _message = wd.decide(state, dict(RUNNING, started=0.0), FAIL, 2000.0 + 25 * i, settings)
        if action == "restart":
            actions.append(2000.0 + 25 * i)
    gaps = [b - a for a, b in zip(actions, actions[1:], strict=False)]
    # First restart after 3 failures, then at least 300, 600, 1000 (capped) s apart.
    assert actions[0] == 2050.0
    assert gaps[0] >= 300 and gaps[1] >= 600 and all(1000 <= g < 1100 for g in gaps[2:])
    assert state["unhelpful"] == len(actions)


def test_the_backoff_says_when_the_next_restart_comes():
    state = dict(wd.new_state(), unhelpful=2, last_restart=2000.0, failures=2)
    _state, action, message = wd.decide(state, RUNNING, FAIL, 2100.0, {"backoff": 300})
    assert action == "wait"
    assert "the last 2 restart(s) did not help: next restart in 500 s (backoff)" in message


def test_a_success_clears_the_backoff():
    state = dict(wd.new_state(), unhelpful=3, last_restart=2000.0)
    state, _action, message = wd.decide(state, RUNNING, OK, 2100.0)
    assert state["unhelpful"] == 0 and message == "serving again"
    assert wd.backoff_gap(state["unhelpful"], wd.SETTINGS) == 0


@pytest.mark.parametrize(
    "unit",
    [
        dict(RUNNING, active="inactive", sub="dead"),  # systemctl stop: on purpose
        dict(RUNNING, active="failed", sub="failed"),  # systemd's Restart= owns it
        dict(RUNNING, active="activating", sub="auto-restart"),
        dict(RUNNING, active="deactivating", sub="stop-sigterm"),
    ],
)
def test_a_server_that_is_not_running_is_not_probed(unit):
    reason = wd.skip_reason(unit, None, 5000.0)
    assert reason and "not the watchdog's to start" in reason


def test_a_playbook_hold_keeps_it_off_until_it_expires():
    hold = {"until": 5100.0, "by": "rayvllm.fleet upgrade from ctl"}
    assert wd.skip_reason(RUNNING, hold, 5000.0) == "held off by rayvllm.fleet upgrade from ctl for 100 s more"
    assert wd.skip_reason(RUNNING, hold, 5100.0) is None
    assert wd.skip_reason(RUNNING, {"until": "garbage"}, 5000.0) is None
    assert wd.skip_reason(RUNNING, None, 5000.0) is None


def test_generation_tokens_sums_the_series_of_the_counter():
    page = "\n".join(
        [
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            'vllm:generation_tokens_total{engine="0",model_name="m"} 120.0',
            'vllm:generation_tokens_total{engine="1",model_name="m"} 3.0',
            'vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09',
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 999.0',
        ]
    )
    assert wd.generation_tokens(page) == 123.0
    assert wd.generation_tokens("up 1\n") is None


class _Server(http.server.BaseHTTPRequestHandler):
    hang = threading.Event()
    seen = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b'vllm:generation_tokens_total{model_name="m"} 7.0\n'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.seen.append(self.headers.get("Authorization"))
        length = int(self.headers["Content-Length"])
        request = json.loads(self.rfile.read(length))
        if self.hang.is_set():
            time.sleep(1.5)  # past the client's timeout: what a hung engine looks like
        body = json.dumps({"usage": {"completion_tokens": request["max_tokens"]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    _Server.hang.clear()
    httpd.shutdown()


def test_probe_sends_the_key_and_reads_the_counter(server):
    result = wd.probe_server(server, "sekret", "m", timeout=5)
    assert result == {"ok": True, "error": "", "tokens": 7.0}
    assert _Server.seen[-1] == "Bearer sekret"


def test_probe_of_a_hung_server_times_out_without_the_key_in_the_error(server):
    _Server.hang.set()
    result = wd.probe_server(server, "sekret", "m", timeout=0.5)
    assert not result["ok"] and result["error"].startswith("no answer after ")
    assert "sekret" not in result["error"] and result["tokens"] == 7.0


def test_probe_of_nothing_listening():
    result = wd.probe_server("http://127.0.0.1:9", "k", "m", timeout=1)
    assert not result["ok"] and result["error"].startswith("no answer (") and result["tokens"] is None
