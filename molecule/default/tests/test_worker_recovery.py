"""Destructive: runs after the other verify files (alphabetical order), since killing a
worker's Ray also takes down the vLLM workers placed on it."""

import subprocess

from conftest import NODE_IPS, alive_nodes, wait_for


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
