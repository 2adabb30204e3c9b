"""Issue 29 on the converged sandbox: a node leaves its cluster with playbooks/remove_node.yml and joins it again
with site.yml, cluster default serving through the router throughout.

ray-worker-2 (2 of cluster default's 6 GPUs; vLLM is tensor parallel 4) leaves: Ray no longer lists it, its Ray
unit is stopped and disabled, Prometheus no longer scrapes it, the other nodes' firewall no longer opens to it; then
site.yml (the node still in the inventory) brings it back, and vLLM does not restart for it (its parallel plan does
not change). With RAYVLLM_SLOW_TESTS=1 also the removal of a dead server (the container killed), and a second
removal that changes nothing followed by reset.yml and a limited site.yml that converges the node again."""

import json
import os
import re
import subprocess

import pytest

from sandbox import (
    NODE_IPS,
    sh as sandbox_sh,
    ROUTER_URL,
    CompletionPoller,
    alive_nodes,
    api,
    complete,
    playbook,
    ray_api,
    unit_started,
    wait_for,
)

LEAVING = "ray-worker-2"
ADDRESS = NODE_IPS[LEAVING]


def sh(host, command):
    """What a command prints on a host; its exit status is the test's to judge (an absent unit, no process)."""
    return sandbox_sh(host, command, check=False)


def alive_ips():
    return sorted(n["node_ip"] for n in alive_nodes())


def scraped(address):
    """Whether Prometheus has a target on that address."""
    return any(f"//{address}:" in t["scrapeUrl"] for t in api("targets")["activeTargets"])


def firewall_members(host):
    return sh(host, "nft list table inet rayvllm_fleet")


def rejoined():
    """Back as before: every node ALIVE, the node's Ray enabled, Prometheus scraping it, the peers open to it."""
    wait_for(lambda: ADDRESS in alive_ips(), timeout=300)
    wait_for(lambda: scraped(ADDRESS), timeout=120)
    assert ADDRESS in firewall_members("ray-head")
    assert sh(LEAVING, "systemctl is-enabled ray-worker.service") == "enabled"


def removed(out):
    """What the removal left: Ray without the node, its units stopped and disabled, no scrape target, no peer
    opening, vLLM of cluster default serving."""
    assert ADDRESS not in alive_ips(), out
    assert "10.77.0.11" in alive_ips()
    wait_for(lambda: not scraped(ADDRESS), timeout=120)
    assert ADDRESS not in firewall_members("ray-head")
    assert ADDRESS not in firewall_members("ray-worker-1")
    assert complete() >= 1
    assert f"{LEAVING} left the fleet: take it out of the inventory now" in out


def test_a_node_leaves_with_remove_node_and_joins_again_with_site_yml():
    vllm_before = unit_started("ray-head", "vllm.service")
    with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
        rc, out = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={LEAVING}")
        assert rc == 0, out[-6000:]
        removed(out)
        # Ray drained it (through its GCS, with the token) before it stopped, and says so in its record of the node.
        assert f"TASK [Remove node | Ray drains {LEAVING}]" in out and f"changed: [ray-head] => (item={ADDRESS})" in out
        dead = [n for n in ray_api("/api/v0/nodes?limit=1000&detail=1")["data"]["result"]["result"]
                if n["node_ip"] == ADDRESS and n["state"] == "DEAD"]  # fmt: skip
        last = max(dead, key=lambda n: n.get("end_time_ms") or 0)
        assert "preemption: leaving cluster default (rayvllm.fleet remove_node.yml)" in last["state_message"], last
        assert sh(LEAVING, "systemctl is-active ray-worker.service") != "active"
        assert sh(LEAVING, "systemctl is-enabled ray-worker.service") == "disabled"
        ranks = "vLLM restarts on the GPUs of ray-head, ray-worker-1" in out
        restarted = unit_started("ray-head", "vllm.service") != vllm_before
        # vLLM restarted exactly when the run found its ranks on the leaving node.
        assert ranks == restarted, out[-6000:]
        print(f"remove_node: vLLM {'had ranks on ' + LEAVING + ' and restarted' if ranks else 'kept serving'}")

        vllm_removed = unit_started("ray-head", "vllm.service")
        rc, out = playbook("site.yml")
        assert rc == 0, out[-6000:]
        rejoined()
        # The plan did not change (tensor parallel 4 fits either way), the run says so, and vLLM was not restarted for
        # the new node.
        assert "tensor parallel 4 x pipeline parallel 1 = 4 GPUs of 6 (2+2+2 per node); the plan is unchanged" in (
            " ".join(out.split())  # YAML folds long lines
        ), out[-6000:]
        assert unit_started("ray-head", "vllm.service") == vllm_removed
    client = poller.report()
    print("remove and add a node, router clients:", json.dumps(client))
    assert client["failed"] == 0, client


@pytest.mark.skipif(os.environ.get("RAYVLLM_SLOW_TESTS") != "1", reason="a dead server: set RAYVLLM_SLOW_TESTS=1")
def test_a_dead_server_is_removed_without_its_own_cleanup():
    subprocess.run(["docker", "kill", LEAVING], check=True, capture_output=True)
    try:
        with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
            rc, out = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={LEAVING}")
            assert rc == 0, out[-6000:]
            assert f"{LEAVING} did not answer" in out
            removed(out)
        client = poller.report()
        print("remove a dead server, router clients:", json.dumps(client))
        assert client["failed"] == 0, client
    finally:
        subprocess.run(["docker", "start", LEAVING], check=True, capture_output=True)
        rc, out = playbook("site.yml")
        assert rc == 0, out[-6000:]
        rejoined()


# What playbooks/reset.yml must leave nothing of on a Ray worker (the test's list, independent of the role's).
LEFTOVERS = {
    "units": "systemctl list-unit-files --no-legend 'ray-*' 'vllm*' rayvllm-firewall.service | awk '{print $1}'",
    "processes": "pgrep -af 'ray::|/raylet|/gcs_server|/opt/ray/|/opt/vllm/' | grep -v pgrep || true",
    "venvs and files": "ls -d /opt/ray /opt/vllm /opt/rayvllm /etc/ray /etc/vllm /etc/rayvllm /var/lib/ray"
    " /var/lib/vllm /usr/local/lib/rayvllm /var/cache/rayvllm /tmp/ray /run/vllm-watchdog"
    " /etc/sysctl.d/60-rayvllm.conf 2>/dev/null || true",
    "/dev/shm segments": "ls /dev/shm | grep -E '^(plasma|ray_|ray-|vllm|psm_|torch_)' || true",
    "firewall table": "nft list table inet rayvllm_fleet >/dev/null 2>&1 && echo 'table inet rayvllm_fleet' || true",
}


@pytest.mark.skipif(
    os.environ.get("RAYVLLM_SLOW_TESTS") != "1", reason="reset and a fresh converge of a node: set RAYVLLM_SLOW_TESTS=1"
)
def test_a_second_removal_changes_nothing_and_a_reset_leaves_nothing_of_ours():
    rc, out = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={LEAVING}")
    assert rc == 0, out[-6000:]
    # A second removal finds nothing left to stop.
    rc, again = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={LEAVING}")
    recap = again.split("PLAY RECAP")[-1]
    assert rc == 0 and LEAVING in recap and set(re.findall(r"changed=(\d+)", recap)) == {"0"}, again[-4000:]
    vllm_removed = unit_started("ray-head", "vllm.service")
    rc, out = playbook("playbooks/reset.yml", "--limit", LEAVING, "-e", "reset_confirm=yes")
    assert rc == 0, out[-6000:]
    left = {what: sh(LEAVING, command) for what, command in LEFTOVERS.items()}
    assert not any(left.values()), left
    rc, again = playbook("playbooks/reset.yml", "--limit", LEAVING, "-e", "reset_confirm=yes")
    recap = again.split("PLAY RECAP")[-1]
    assert rc == 0 and set(re.findall(r"changed=(\d+)", recap)) == {"0"}, again[-4000:]
    # A limited run to the node and its cluster's head converges it as a new node.
    rc, out = playbook("site.yml", "--limit", f"{LEAVING},ray-head")
    assert rc == 0, out[-6000:]
    rejoined()
    assert unit_started("ray-head", "vllm.service") == vllm_removed
