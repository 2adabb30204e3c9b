"""The front door's tenants on a real HAProxy (Debian 12's 2.6, unpacked under .cache/haproxy by
scripts/debian-unpack.sh) in front of two stand-in routers on this machine that answer at once and echo what they
received: keys, grants, limits and the audit log, as module_utils/front_door.py and door_tenants.py write them."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.rayvllm.fleet.plugins.module_utils import door_tenants  # noqa: E402
from ansible_collections.rayvllm.fleet.plugins.module_utils import front_door as fd  # noqa: E402

HAPROXY_DIR = ROOT / ".cache/haproxy"
HAPROXY = HAPROXY_DIR / "x/usr/sbin/haproxy"
PACKAGES = ["haproxy", "liblua5.3-0", "libopentracing-c-wrapper0", "libopentracing1"]
CLUSTER_KEYS = {"tiny-chat": "cluster-key-of-b-0123456789", "tiny-llama": "cluster-key-shared-0123456789"}
TENANTS = [
    {"name": "team-a", "key": "team-a-key-0123456789abcdef"},
    {"name": "team-b", "key": "team-b-key-0123456789abcdef", "models": ["tiny-chat"], "requests_per_minute": 3},
    {"name": "team-c", "key": "team-c-key-0123456789abcdef", "max_in_flight": 1},
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Echo(http.server.BaseHTTPRequestHandler):
    """A stand-in router: answers with the Authorization it got and the model; a "slow" prompt is answered only once
    the test releases it (the events, not a sleep: these tests may run at idle priority beside a busy machine)."""

    slow_arrived = threading.Event()
    release = threading.Event()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if body.get("prompt") == "slow":
            Echo.slow_arrived.set()
            Echo.release.wait(timeout=60)
        out = json.dumps({"auth": self.headers.get("authorization"), "model": body.get("model"),
                          "router": self.server.server_port}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    if not HAPROXY.exists():
        subprocess.run(["bash", str(ROOT / "scripts/debian-unpack.sh"), str(HAPROXY_DIR), *PACKAGES], check=True)
    tmp = tmp_path_factory.mktemp("door")
    routers = {}
    servers = []
    for model in sorted(CLUSTER_KEYS):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Echo)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        routers[model] = "127.0.0.1:%d" % server.server_port
    assert door_tenants.problems(TENANTS, list(CLUSTER_KEYS)) == []
    (tmp / "tenants.map").write_text(door_tenants.tenant_map(TENANTS, list(CLUSTER_KEYS)))
    (tmp / "keys.map").write_text(door_tenants.keys_map(CLUSTER_KEYS))
    port = free_port()
    tenancy = {"tenant_map": str(tmp / "tenants.map"), "keys_map": str(tmp / "keys.map"), "cluster_keys_pass": False}
    config, mapping = fd.haproxy_config(routers, "127.0.0.1:%d" % port, str(tmp / "models.map"), tenancy=tenancy)
    (tmp / "models.map").write_text(mapping)
    (tmp / "haproxy.cfg").write_text(config)
    env = dict(os.environ, LD_LIBRARY_PATH=str(HAPROXY_DIR / "x/usr/lib/x86_64-linux-gnu"))
    log = open(tmp / "door.log", "w")  # noqa: SIM115 - closed below
    check = subprocess.run([str(HAPROXY), "-c", "-f", str(tmp / "haproxy.cfg")], env=env, capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.Popen([str(HAPROXY), "-f", str(tmp / "haproxy.cfg")], env=env, stdout=log, stderr=log)
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    yield {"url": url, "log": tmp / "door.log", "routers": routers}
    proc.terminate()
    proc.wait(timeout=10)
    log.close()
    for server in servers:
        server.shutdown()


def call(door, path, key=None, body=None):
    """(status, headers, JSON answer) of one request to the door."""
    request = urllib.request.Request(door["url"] + path, data=None if body is None else json.dumps(body).encode())
    if key:
        request.add_header("Authorization", "Bearer " + key)
    if body is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def key(name):
    return next(t["key"] for t in TENANTS if t["name"] == name)


def complete(door, tenant, model="tiny-chat", prompt="Hi"):
    return call(door, "/v1/completions", key(tenant), {"model": model, "prompt": prompt, "max_tokens": 1})


def test_no_key_a_wrong_key_and_a_clusters_key_get_the_doors_401(door):
    for sent in (None, "not-a-key-of-anyone", CLUSTER_KEYS["tiny-chat"]):
        status, _headers, answer = call(door, "/v1/completions", sent, {"model": "tiny-chat", "prompt": "Hi"})
        assert status == 401 and "needs the key of a tenant" in answer["error"]["message"], (sent, answer)


def test_a_tenant_lists_only_the_models_it_may_use(door):
    assert [m["id"] for m in call(door, "/v1/models", key("team-a"))[2]["data"]] == ["tiny-chat", "tiny-llama"]
    assert [m["id"] for m in call(door, "/v1/models", key("team-b"))[2]["data"]] == ["tiny-chat"]


def test_the_router_gets_the_clusters_key_in_place_of_the_tenants(door):
    for model in CLUSTER_KEYS:
        status, _headers, answer = complete(door, "team-a", model)
        assert status == 200
        assert answer == {"auth": "Bearer " + CLUSTER_KEYS[model], "model": model,
                          "router": int(door["routers"][model].rsplit(":", 1)[1])}  # fmt: skip


def test_a_model_the_tenant_may_not_use_gets_a_403_naming_it(door):
    status, _headers, answer = complete(door, "team-b", "tiny-llama")
    assert status == 403
    assert answer["error"]["message"] == 'The tenant team-b may not use the model "tiny-llama": it may use tiny-chat.'


def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_the_others_do_not(door):
    statuses = [complete(door, "team-b")[0] for _request in range(3)]
    assert statuses == [200, 200, 200]
    status, headers, answer = complete(door, "team-b")
    assert status == 429 and headers.get("retry-after") == "60"
    assert "over its limit of 3 requests per minute" in answer["error"]["message"]
    assert [complete(door, "team-a")[0] for _request in range(5)] == [200] * 5


def test_a_tenant_over_its_requests_in_flight_gets_429(door):
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(complete, door, "team-c", "tiny-chat", "slow")
        assert Echo.slow_arrived.wait(timeout=60)
        try:
            status, headers, answer = complete(door, "team-c")
        finally:
            Echo.release.set()
        assert slow.result()[0] == 200
    assert status == 429 and headers.get("retry-after") == "1"
    assert "over its limit of 1 requests in flight" in answer["error"]["message"]
    assert complete(door, "team-c")[0] == 200  # the slow one has finished


def test_the_audit_log_has_a_line_per_request_and_never_a_key_or_a_prompt(door):
    complete(door, "team-a", "tiny-llama", "a secret prompt")
    time.sleep(0.5)
    text = door["log"].read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert {"tenant": "team-a", "model": "tiny-llama", "status": 200} in [
        {k: line[k] for k in ("tenant", "model", "status")} for line in lines
    ]
    assert all(set(line) == {"time", "tenant", "model", "status", "ms", "bytes_in", "bytes_out"} for line in lines)
    for secret in [t["key"] for t in TENANTS] + list(CLUSTER_KEYS.values()) + ["a secret prompt"]:
        assert secret not in text
