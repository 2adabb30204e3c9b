import copy
import io
import json
from urllib.error import HTTPError, URLError

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import fleet_status as fs
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import preflight

KEY = "sk-SECRET-4f9a2c71"
TOKEN = "ray-TOKEN-19d0"


class Response:
    def __init__(self, payload, status=200):
        self.body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.status = status

    def read(self):
        return self.body

    def getcode(self):
        return self.status

    def close(self):
        pass


class Opener:
    """Answers by path (the query string ignored); records (method, url, headers)."""

    def __init__(self, routes):
        self.routes = routes
        self.calls = []

    def __call__(self, request, timeout):
        self.calls.append((request.get_method(), request.full_url, dict(request.header_items())))
        path = "/" + request.full_url.split("/", 3)[3].split("?")[0]
        answer = self.routes.get(path)
        if answer is None:
            raise URLError(ConnectionRefusedError(111, "Connection refused"))
        if isinstance(answer, int):
            raise HTTPError(request.full_url, answer, "error", {}, io.BytesIO(b"{}"))
        return Response(answer)


def ray_nodes(*nodes):
    rows = [
        {"node_ip": ip, "node_id": "id-" + ip, "is_head_node": head, "state": "ALIVE", "resources_total": {"GPU": g}}
        for ip, head, g in nodes
    ]
    return {"result": True, "data": {"result": {"result": rows}}}


def node(cluster, role, ip, gpus=2):
    settings = {"ray_version": "2.59.0", "vllm_version": "0.31.0", "ray_num_gpus": gpus}
    return {"cluster": cluster, "role": role, "ip": ip, "settings": settings}


MODEL = {
    "clusters": {
        "default": {
            "name": "default",
            "head": "ray-head",
            "workers": ["ray-worker-1", "ray-worker-2"],
            "hosts": ["ray-head", "ray-worker-1", "ray-worker-2"],
            "served_model_name": "tiny-llama",
            "vllm_url": "http://10.77.0.10:8000",
            "router_model": "tiny-llama",
        },
        "b": {
            "name": "b",
            "head": "ray-b-head",
            "workers": [],
            "hosts": ["ray-b-head"],
            "served_model_name": "tiny-llama",
            "vllm_url": "http://10.77.0.13:8000",
            "router_model": "tiny-llama",
        },
    },
    "nodes": {
        "ray-head": node("default", "head", "10.77.0.10"),
        "ray-worker-1": node("default", "worker", "10.77.0.11"),
        "ray-worker-2": node("default", "worker", "10.77.0.12"),
        "ray-b-head": node("b", "head", "10.77.0.13"),
    },
    "routers": {
        "hosts": ["ray-head"],
        "models": {
            "tiny-llama": {
                "backends": [
                    {"cluster": "default", "url": "http://10.77.0.10:8000"},
                    {"cluster": "b", "url": "http://10.77.0.13:8000"},
                ],
                "urls": {"ray-head": "http://10.77.0.10:30000"},
            }
        },
    },
    "monitoring": {"host": "ray-head"},
}


def healthy_probes():
    def cluster(nodes):
        return {
            "ray": {"url": "http://x:8265", "nodes": nodes, "version": "2.59.0", "error": ""},
            "vllm": {
                "url": "http://x:8000",
                "model": "tiny-llama",
                "version": "0.31.0",
                "version_error": "",
                "completion": {"tokens": 4, "seconds": 0.42},
                "error": "",
            },
        }

    return {
        "clusters": {
            "default": cluster(
                [
                    {"ip": "10.77.0.10", "node_id": "a", "is_head": True, "gpus": 2.0, "cpus": 4.0},
                    {"ip": "10.77.0.11", "node_id": "b", "is_head": False, "gpus": 2.0, "cpus": 4.0},
                    {"ip": "10.77.0.12", "node_id": "c", "is_head": False, "gpus": 2.0, "cpus": 4.0},
                ]
            ),
            "b": cluster([{"ip": "10.77.0.13", "node_id": "d", "is_head": True, "gpus": 2.0, "cpus": 4.0}]),
        },
        "routers": {
            "ray-head": [
                {
                    "url": "http://10.77.0.10:30000",
                    "rotation": ["http://10.77.0.10:8000", "http://10.77.0.13:8000"],
                    "error": "",
                }
            ]
        },
        "alertmanager": {"url": "http://10.77.0.10:9093", "alerts": [], "error": ""},
    }


def alert(name, severity, **labels):
    return {
        "name": name,
        "severity": severity,
        "labels": dict(labels, alertname=name, severity=severity),
        "since": "2026-11-25T18:00:00Z",
        "summary": "",
    }


# --- reading ----------------------------------------------------------------------------------------


def test_probe_ray_reads_nodes_and_version_with_the_token(tmp_path):
    token_file = tmp_path / "auth_token"
    token_file.write_text(TOKEN + "\n")
    opener = Opener(
        {
            "/api/v0/nodes": ray_nodes(("10.77.0.11", False, 2), ("10.77.0.10", True, 2)),
            "/api/v0/cluster_metadata": {"result": True, "data": {"rayVersion": "2.59.0", "pythonVersion": "3.11.2"}},
        }
    )
    result = fs.probe_ray("http://10.77.0.10:8265", str(token_file), opener=opener)
    assert result["error"] == ""
    assert result["version"] == "2.59.0"
    assert [n["ip"] for n in result["nodes"]] == ["10.77.0.10", "10.77.0.11"]
    assert all(call[2]["Authorization"] == "Bearer " + TOKEN for call in opener.calls)
    assert TOKEN not in json.dumps(result)


def test_probe_ray_without_answer_or_token_says_why(tmp_path):
    result = fs.probe_ray("http://10.77.0.10:8265", "", opener=Opener({}))
    assert result["nodes"] is None and "cannot reach" in result["error"]
    result = fs.probe_ray("http://10.77.0.10:8265", str(tmp_path / "missing"), opener=Opener({}))
    assert result["nodes"] is None and "cannot read the Ray token file" in result["error"]
    result = fs.probe_ray("http://h:8265", "", opener=Opener({"/api/v0/nodes": 401}))
    assert "HTTP 401" in result["error"] and "token" in result["error"]


def test_probe_vllm_version_and_completion_latency_key_never_returned():
    answer = {"choices": [{"text": " Paris"}], "usage": {"completion_tokens": 4}}
    opener = Opener({"/version": {"version": "0.31.0"}, "/v1/completions": answer})
    result = fs.probe_vllm("http://10.77.0.10:8000/v1", KEY, "tiny-llama", max_tokens=4, opener=opener)
    assert result["version"] == "0.31.0"
    assert result["completion"]["tokens"] == 4 and result["completion"]["seconds"] >= 0
    assert result["error"] == ""
    completion_call = [c for c in opener.calls if c[0] == "POST"][0]
    assert completion_call[2]["Authorization"] == "Bearer " + KEY
    assert "Authorization" not in [c for c in opener.calls if c[1].endswith("/version")][0][2]
    assert KEY not in json.dumps(result)


def test_probe_vllm_refused_key_and_no_version():
    result = fs.probe_vllm("http://h:8000", KEY, "m", opener=Opener({"/v1/completions": 401}))
    assert result["completion"] is None
    assert "API key was refused" in result["error"]
    assert "cannot reach" in result["version_error"] and result["version"] == ""
    assert KEY not in json.dumps(result)


@pytest.mark.parametrize(
    "text, key",
    [
        ('VLLM_HOST_IP="10.0.0.1"\nVLLM_API_KEY="abc\\$def"\n', "abc$def"),
        ("VLLM_API_KEY=plain\n", "plain"),
        ("only-the-key\n", "only-the-key"),
        ('OTHER="1"\n', ""),
        ("OTHER=1\n", ""),
        ("bXlrZXk=\n", "bXlrZXk="),  # a base64 key with its padding (a ray_serve key file)
        ("", ""),
    ],
)
def test_read_api_key(text, key):
    assert fs.read_api_key(text) == key


def test_router_rotation_and_errors():
    opener = Opener({"/list_workers": {"urls": ["http://10.77.0.13:8000/", "http://10.77.0.10:8000"]}})
    result = fs.probe_router("http://10.77.0.10:30000/", opener=opener)
    assert result == {
        "url": "http://10.77.0.10:30000",
        "rotation": ["http://10.77.0.10:8000", "http://10.77.0.13:8000"],
        "error": "",
    }
    assert fs.probe_router("http://h:30000", opener=Opener({"/list_workers": b"<html>"}))["rotation"] is None
    assert "not JSON" in fs.probe_router("http://h:30000", opener=Opener({"/list_workers": b"<html>"}))["error"]


def test_alertmanager_keeps_active_alerts_only_and_asks_for_unsilenced():
    payload = [
        {
            "labels": {"alertname": "VllmDown", "severity": "critical", "ray_cluster": "b", "host": "ray-b-head"},
            "status": {"state": "active"},
            "startsAt": "2026-11-25T18:00:00Z",
            "annotations": {"summary": "vLLM down"},
        },
        {"labels": {"alertname": "Old"}, "status": {"state": "suppressed"}},
    ]
    opener = Opener({"/api/v2/alerts": payload})
    result = fs.probe_alertmanager("http://10.77.0.10:9093", opener=opener)
    assert [a["name"] for a in result["alerts"]] == ["VllmDown"]
    assert result["alerts"][0]["summary"] == "vLLM down"
    assert "silenced=false" in opener.calls[0][1] and "inhibited=false" in opener.calls[0][1]
    assert "not a list" in fs.probe_alertmanager("http://h:9093", opener=Opener({"/api/v2/alerts": {}}))["error"]


# --- comparing --------------------------------------------------------------------------------------


def test_healthy_fleet_is_ok_and_renders_one_table_per_cluster():
    report = fs.evaluate(MODEL, healthy_probes())
    assert report["ok"], report["problems_text"]
    default = report["clusters"]["default"]
    assert (default["alive"], default["expected_nodes"], default["gpus"], default["expected_gpus"]) == (3, 3, 6.0, 6.0)
    assert default["router"] == {"ray-head": "in"}
    lines = fs.render(report)
    text = "\n".join(lines)
    assert "cluster b: OK" in text and "cluster default: OK" in text
    assert "nodes alive      3/3" in text
    assert "GPUs             6/6" in text
    assert "Ray              2.59.0" in text
    assert "tiny-llama: 4 token(s) in 0.42 s" in text
    assert "in on ray-head" in text
    assert "firing alerts    none" in text
    assert any(line.split()[:4] == ["ray-worker-2", "worker", "10.77.0.12", "ALIVE"] for line in lines)
    json.dumps(report)  # printable as JSON for scripts


def test_worker_not_alive_is_named():
    probes = healthy_probes()
    probes["clusters"]["default"]["ray"]["nodes"].pop(2)
    report = fs.evaluate(MODEL, probes)
    assert not report["ok"]
    assert report["problems"] == [
        {
            "host": "ray-worker-2",
            "what": "Ray node 10.77.0.12 in cluster default",
            "expected": "ALIVE",
            "found": "not alive",
        }
    ]
    assert report["problems_text"] == [
        "ray-worker-2: Ray node 10.77.0.12 in cluster default: expected ALIVE, found not alive"
    ]
    assert report["clusters"]["default"]["alive"] == 2
    assert "NOT AS THE INVENTORY ASKS" in "\n".join(fs.render(report))


def test_node_not_in_inventory_gpus_and_versions():
    probes = healthy_probes()
    default = probes["clusters"]["default"]
    default["ray"]["nodes"].append({"ip": "10.77.0.20", "node_id": "e", "is_head": False, "gpus": 2.0, "cpus": 1.0})
    default["ray"]["nodes"][1]["gpus"] = 1.0
    default["ray"]["version"] = "2.60.0"
    default["vllm"]["version"] = "0.32.0"
    texts = fs.evaluate(MODEL, probes)["problems_text"]
    assert "ray-worker-1: GPUs in Ray: expected 2, found 1" in texts
    assert any(t.startswith("10.77.0.20: ALIVE member of Ray cluster default") for t in texts)
    assert "ray-head: Ray version of cluster default: expected 2.59.0, found 2.60.0" in texts
    assert "ray-head: vLLM version of cluster default: expected 0.31.0, found 0.32.0" in texts
    table = "\n".join(fs.render(fs.evaluate(MODEL, probes)))
    assert "2.60.0 (asked for 2.59.0)" in table


def test_no_completion_out_of_rotation_and_critical_alert():
    probes = healthy_probes()
    probes["clusters"]["b"]["vllm"].update(completion=None, error="POST http://x:8000/v1/completions: HTTP 503: down")
    probes["routers"]["ray-head"][0]["rotation"] = ["http://10.77.0.10:8000"]
    probes["alertmanager"]["alerts"] = [
        alert("VllmDown", "critical", ray_cluster="b", host="ray-b-head"),
        alert("VllmQueueLong", "warning", ray_cluster="default", host="ray-head"),
        alert("Other", "critical", ray_cluster="c"),
    ]
    report = fs.evaluate(MODEL, probes)
    texts = report["problems_text"]
    assert len(texts) == 3, texts
    assert texts[0].startswith("ray-b-head: completion of tiny-llama at http://x:8000: expected one completion, found")
    assert (
        "ray-head: cluster b (http://10.77.0.13:8000) in the tiny-llama router's rotation: expected in, found out"
        in texts
    )
    assert any(t.startswith("ray-b-head: alert VllmDown (critical) of cluster b: expected not firing") for t in texts)
    assert [a["name"] for a in report["clusters"]["default"]["alerts"]] == ["VllmQueueLong"]
    table = "\n".join(fs.render(report))
    assert "VllmQueueLong (warning, ray-head)" in table
    assert "out on ray-head" in table
    assert "tiny-llama: NO (POST" in table
    assert fs.evaluate(MODEL, probes, fail_severities=[])["problems_text"] == texts[:2]


def test_every_model_of_a_ray_serve_cluster_answers_one_completion():
    model = json.loads(json.dumps(MODEL))
    model["clusters"]["b"]["served_models"] = ["tiny-llama", "tiny-chat"]
    probes = healthy_probes()
    probes["clusters"]["b"]["vllm"]["more"] = {"tiny-chat": {"completion": {"tokens": 4, "seconds": 0.2}, "error": ""}}
    report = fs.evaluate(model, probes)
    assert report["ok"], report["problems_text"]
    assert "tiny-llama: 4 token(s) in 0.42 s; tiny-chat: 4 token(s) in 0.2 s" in "\n".join(fs.render(report))
    probes["clusters"]["b"]["vllm"]["more"]["tiny-chat"] = {"completion": None, "error": "HTTP 404: no such model"}
    report = fs.evaluate(model, probes)
    assert report["problems_text"] == [
        "ray-b-head: completion of tiny-chat at http://x:8000: expected one completion, found HTTP 404: no such model"
    ]
    assert "tiny-chat: NO (HTTP 404: no such model)" in "\n".join(fs.render(report))


def test_unreached_head_router_and_alertmanager_are_problems():
    probes = healthy_probes()
    del probes["clusters"]["b"]
    probes["clusters"]["default"]["ray"].update(nodes=None, error="cannot reach http://x:8265: refused")
    probes["routers"] = {}
    probes["alertmanager"] = {"url": "http://10.77.0.10:9093", "alerts": None, "error": "HTTP 500"}
    report = fs.evaluate(MODEL, probes)
    texts = report["problems_text"]
    assert "ray-b-head: cluster b's status: expected read from its head, found the head not reached" in texts
    assert "ray-head: Ray dashboard http://x:8265: expected answers, found cannot reach http://x:8265: refused" in texts
    assert any(t.startswith("ray-head: router tiny-llama at http://10.77.0.10:30000") for t in texts)
    assert (
        texts[-1] == "ray-head: Alertmanager at http://10.77.0.10:9093: expected answers /api/v2/alerts, found HTTP 500"
    )
    lines = fs.render(report)
    assert lines[-1] == "! " + texts[-1]
    assert "? (Alertmanager not read)" in "\n".join(lines)
    assert report["clusters"]["default"]["nodes"][0]["state"] == "?"


def test_no_alertmanager_or_router_in_the_inventory():
    model = copy.deepcopy(MODEL)
    model["routers"] = {"hosts": [], "models": {}}
    for cluster in model["clusters"].values():
        cluster["router_model"] = ""
    probes = healthy_probes()
    probes["alertmanager"] = None
    probes["routers"] = {}
    report = fs.evaluate(model, probes)
    assert report["ok"], report["problems_text"]
    assert "no router" in "\n".join(fs.render(report))


def test_gpus_detected_by_ray_are_not_compared():
    model = copy.deepcopy(MODEL)
    for n in model["nodes"].values():
        n["settings"]["ray_num_gpus"] = None
    report = fs.evaluate(model, healthy_probes())
    assert report["ok"]
    assert report["clusters"]["default"]["expected_gpus"] is None
    assert "GPUs             6/?" in "\n".join(fs.render(report))


def test_preflight_names_a_live_member_the_inventory_no_longer_has():
    """ray-worker-2 taken out of the inventory while its Ray still runs: preflight names it before the run
    firewalls it off; Ray not read (a first deployment) or every member known: nothing to say."""
    retired = copy.deepcopy(MODEL)
    del retired["nodes"]["ray-worker-2"]
    retired["clusters"]["default"]["hosts"].remove("ray-worker-2")
    live = healthy_probes()["clusters"]["default"]["ray"]
    (problem,) = preflight_problems(retired, {"default": live})
    assert problem.startswith("10.77.0.12 is a live member of cluster default's Ray (ALIVE in the node list of its "
                              "head ray-head, 2 GPUs), but no host of the inventory has that address.")  # fmt: skip
    assert "add it back to the inventory (ray_workers, ray_node_ip 10.77.0.12)" in problem
    assert "run playbooks/remove_node.yml -e remove_nodes=<it>" in problem
    assert fs.members_not_in_inventory(live["nodes"], MODEL, "default") == []
    assert preflight_problems(MODEL, {"default": live}) == []
    unread = {"default": {"url": "http://x:8265", "nodes": None, "version": "", "error": "connection refused"}}
    assert preflight_problems(retired, unread) == []


def test_preflight_names_the_inventory_host_of_a_member_moved_to_another_cluster():
    moved = copy.deepcopy(MODEL)
    moved["nodes"]["ray-worker-2"]["cluster"] = "b"
    moved["clusters"]["default"]["hosts"].remove("ray-worker-2")
    moved["clusters"]["b"]["hosts"].append("ray-worker-2")
    live = healthy_probes()["clusters"]["default"]["ray"]
    (problem,) = preflight_problems(moved, {"default": live})
    assert "but the inventory puts ray-worker-2 (ray_node_ip 10.77.0.12) in cluster b" in problem


def preflight_problems(model, members):
    return preflight.fleet_problems({}, "ray-head", model, {"ray_members": members})
