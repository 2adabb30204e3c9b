"""A fault on the converged sandbox: killing a worker's Ray also takes down the vLLM workers placed on it;
the node rejoins and vLLM serves again on their own. Its own stage, after verify."""

import json
import subprocess
import urllib.request

from sandbox import HEAD_IP, NODE_IPS, SETTINGS, alive_nodes, vllm_api_key, wait_for


def test_killed_worker_rejoins_on_its_own():
    """systemctl kill of a worker's Ray processes: systemd restarts it and the node rejoins."""
    before = {n["node_ip"]: n["node_id"] for n in alive_nodes()}
    restarts = int(
        subprocess.check_output(
            ["docker", "exec", "ray-worker-1", "systemctl", "show", "-p", "NRestarts", "--value", "ray-worker"]
        )
    )
    subprocess.check_call(
        ["docker", "exec", "ray-worker-1", "systemctl", "kill", "--signal=SIGKILL", "ray-worker.service"]
    )
    ip = NODE_IPS["ray-worker-1"]

    def rejoined():
        # Exactly three ALIVE nodes: the killed one declared dead, its replacement joined.
        nodes = alive_nodes()
        ids = {n["node_ip"]: n["node_id"] for n in nodes}
        return len(nodes) == 3 and ids.get(ip) not in (None, before[ip])

    wait_for(rejoined, timeout=180)
    after = int(
        subprocess.check_output(
            ["docker", "exec", "ray-worker-1", "systemctl", "show", "-p", "NRestarts", "--value", "ray-worker"]
        )
    )
    assert after == restarts + 1
    assert sum(n["resources_total"].get("GPU", 0) for n in alive_nodes()) == 6


def test_vllm_serves_again_after_the_worker_came_back():
    """vLLM's engine exits when a node with its workers dies; systemd restarts it once Ray has healed."""
    url = f"http://{HEAD_IP}:8000"

    def completes():
        request = urllib.request.Request(
            url + "/v1/completions",
            data=json.dumps({"model": SETTINGS["vllm_served_model_name"], "prompt": "Hi", "max_tokens": 2}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + vllm_api_key()},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.load(response)["usage"]["completion_tokens"] >= 1

    wait_for(completes, timeout=900, interval=10)
