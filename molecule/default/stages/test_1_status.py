"""playbooks/status.yml with a worker's Ray stopped (issue 29): non-zero, naming the host; the worker is started
again and the fleet left as found. Runs before the upgrade stage, which leaves other versions than the inventory's."""

import subprocess

from sandbox import NODE_IPS, VLLM_URL, alive_nodes, complete, playbook, rotation, wait_for


def test_status_names_a_worker_whose_ray_is_stopped():
    subprocess.run(["docker", "exec", "ray-worker-2", "systemctl", "stop", "ray-worker"], check=True, timeout=120)
    try:
        wait_for(lambda: NODE_IPS["ray-worker-2"] not in [n["node_ip"] for n in alive_nodes()], timeout=120)
        rc, out = playbook("playbooks/status.yml")
        assert rc != 0, out[-3000:]
        assert "ray-worker-2: Ray node 10.77.0.12 in cluster default: expected ALIVE, found not alive" in out
    finally:
        subprocess.run(["docker", "exec", "ray-worker-2", "systemctl", "start", "ray-worker"], check=True, timeout=120)
        wait_for(lambda: NODE_IPS["ray-worker-2"] in [n["node_ip"] for n in alive_nodes()], timeout=300)
    wait_for(lambda: complete() > 0, timeout=600)  # vLLM's ranks on the worker went with its Ray
    # The router's health keeper took the cluster out while it failed; it puts it back after two completions in a
    # row (one round every 5 s), which status.yml checks.
    wait_for(lambda: VLLM_URL in [u.rstrip("/") for u in rotation()], timeout=180, interval=5)
    rc, out = playbook("playbooks/status.yml")
    assert rc == 0, out[-3000:]
