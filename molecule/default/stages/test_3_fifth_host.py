"""Issue 29 on the converged sandbox: new hosts join both clusters with one site.yml and leave them with one
remove_node.yml; then the fifth host joins again, is removed as a dead server and, back, is reset, while the clusters
serve through the router, cluster default's vLLM never restarts and cluster b's Serve keeps its replicas.

ray-worker-3 (1 logical GPU, cluster default) and ray-worker-4 (1 logical GPU, cluster b, which serves through Ray
Serve LLM) are systemd containers of the sandbox's image that this stage starts and removes; the inventories that have
them are copies of the sandbox's (.cache/fifth-host*), so the sandbox's own stays at four hosts.
In order: site.yml adds both (every node and GPU counted, cluster default's parallel plan unchanged, vLLM not
restarted, Serve's replicas the same); playbooks/remove_node.yml removes both, each from its cluster (drained, gone
from Ray's node list, Prometheus' targets and its peers' firewall) and a second removal changes nothing; the operator
takes them out of the inventory, and ray-worker-3 goes on: site.yml limited to it and its cluster's head brings it
back (a node back from maintenance: its venvs are still there); playbooks/status.yml names it while its Ray is stopped
and passes once it is back; then, its container killed, remove_node.yml removes it as a dead server (everything but
its own cleanup); started again, playbooks/reset.yml leaves nothing of ours on it and a second reset changes nothing.
A reset host is a fresh one: its next join is the first test's."""

import json
import re
import subprocess

import pytest
import yaml

from sandbox import (
    B_DASHBOARD,
    CLUSTER_URLS,
    ROUTER_URL,
    CompletionPoller,
    alive_nodes,
    api,
    booted,
    b_token,
    complete,
    playbook,
    ray_api,
    sandbox_inventory,
    serve_details,
    sh as sandbox_sh,
    start_host,
    ROOT,
    task_results,
    unit_started,
    wait_for,
)

FIFTH = "ray-worker-3"
ADDRESS = "10.77.0.14"
PEERS = ("ray-head", "ray-worker-1", "ray-worker-2")  # the other nodes of cluster default
SIXTH = "ray-worker-4"  # joins cluster b beside the fifth, and leaves with it
B_ADDRESS = "10.77.0.15"


@pytest.fixture(scope="module")
def hosts():
    """The two new hosts, running for the module and removed after it."""
    try:
        for name, address in ((FIFTH, ADDRESS), (SIXTH, B_ADDRESS)):
            start_host(name, address)
        yield
    finally:
        for name in (FIFTH, SIXTH):
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


# Their venvs are installed without compiling their bytecode (python_venv_compile_bytecode: false, the path no other
# sandbox host takes): compiling a vLLM venv costs about 200 CPU seconds on the 2-core build machine.
NEW_HOST = {"ray_num_gpus": 1, "python_venv_compile_bytecode": False}


@pytest.fixture(scope="module")
def both(hosts):
    """The sandbox inventory with both new hosts in ray_workers: the fifth in cluster default (the group's default),
    the sixth with ray-b-head's host_vars (cluster b's settings are cluster-wide: preflight refuses a node that
    differs), each declaring one GPU."""
    b_vars = yaml.safe_load((ROOT / "inventories/sandbox/host_vars/ray-b-head.yml").read_text())
    return sandbox_inventory(
        "fifth-host-both",
        add_hosts={"ray_workers": [FIFTH, SIXTH]},
        host_vars={FIFTH: NEW_HOST, SIXTH: {**b_vars, **NEW_HOST}},
    )


@pytest.fixture(scope="module")
def inventory(hosts):
    """The same without the sixth host, once it left (what the operator is told to do): the fifth's inventory."""
    return sandbox_inventory("fifth-host", add_hosts={"ray_workers": [FIFTH]}, host_vars={FIFTH: NEW_HOST})


def sh(host, command):
    """What a command prints on a host; its exit status is the test's to judge (an absent unit, no process)."""
    return sandbox_sh(host, command, check=False)


def alive_ips():
    return sorted(n["node_ip"] for n in alive_nodes())


def cluster_gpus():
    """The GPUs of cluster default's ALIVE nodes, as Ray counts them."""
    return sum(n.get("resources_total", {}).get("GPU", 0) for n in alive_nodes())


def scraped(address):
    """Whether Prometheus has a target on that address."""
    return any(f"//{address}:" in t["scrapeUrl"] for t in api("targets")["activeTargets"])


def opens_to(host, address):
    """Whether the host's firewall lets that address in (the fleet's members are in our table)."""
    return address in sh(host, "nft list table inet rayvllm_fleet")


def ran(out):
    """The PLAY RECAP of a run, and that every host in it changed nothing."""
    recap = out.split("PLAY RECAP")[-1]
    return recap, set(re.findall(r"changed=(\d+)", recap)) == {"0"}


def vllm_started():
    return unit_started("ray-head", "vllm.service")


def joined(peers):
    """A member again: ALIVE in Ray with its GPU (7 in the cluster), its Ray enabled, Prometheus scraping it, the
    given peers' firewall open to it."""
    wait_for(lambda: ADDRESS in alive_ips(), timeout=300)
    wait_for(lambda: cluster_gpus() == 7, timeout=60)
    wait_for(lambda: scraped(ADDRESS), timeout=120)
    assert sh(FIFTH, "systemctl is-enabled ray-worker.service") == "enabled"
    closed = [peer for peer in peers if not opens_to(peer, ADDRESS)]
    assert not closed, f"the firewall of {closed} does not let {FIFTH} in"


def plan_unchanged(out):
    """The run's plan line: tensor parallel 4 fits the 7 GPUs as it did the 6, so vLLM keeps running."""
    line = "tensor parallel 4 x pipeline parallel 1 = 4 GPUs of 7 (2+2+2+1 per node); the plan is unchanged"
    assert line in " ".join(out.split()), out[-6000:]  # YAML folds long lines


def removed(out, names=FIFTH, pronoun="it"):
    """What a removal leaves: Ray without the node (6 GPUs), no scrape target, no peer opening, cluster default
    serving, and the run telling the operator to take the hosts out of the inventory."""
    assert ADDRESS not in alive_ips(), out[-6000:]
    assert cluster_gpus() == 6
    wait_for(lambda: not scraped(ADDRESS), timeout=120)
    still = [peer for peer in PEERS if opens_to(peer, ADDRESS)]
    assert not still, f"the firewall of {still} still lets {FIFTH} in"
    assert complete() >= 1
    assert f"{names} left the fleet: take {pronoun} out of the inventory now" in out


def b_nodes():
    """Cluster b's ALIVE nodes: {address: GPUs}."""
    return {n["node_ip"]: n.get("resources_total", {}).get("GPU", 0) for n in alive_nodes(B_DASHBOARD, b_token())}


def serve_state():
    """Cluster b's Serve application: when it was last deployed (a config sent moves it), and the replicas of each
    deployment of a fixed size, {deployment: sorted replica ids} (a new id is a replica replaced). tiny-llama
    autoscales between 1 and 2 replicas under the router's clients of the test itself, so its replicas may change
    while nothing is sent to Serve (seen on a slow build machine: one added under load, the older one removed after)."""
    app = serve_details()["applications"]["llm"]

    def fixed_size(deployment):
        scaling = (deployment.get("deployment_config") or {}).get("autoscaling_config") or {}
        return scaling.get("min_replicas") == scaling.get("max_replicas")

    fixed = {
        name: sorted(r["replica_id"] for r in d["replicas"]) for name, d in app["deployments"].items() if fixed_size(d)
    }
    return app["last_deployed_time_s"], fixed


def served(poller, what):
    client = poller.report()
    print(f"{what}, router clients:", json.dumps(client))
    assert client["failed"] == 0, client


def test_new_hosts_join_both_clusters_with_one_site_yml_while_vllm_and_serve_keep_running(both):
    """The fifth host joins cluster default, whose vLLM keeps running (its plan does not use the new GPU); the sixth
    joins cluster b, where Serve gets the GPU for another replica without a new config or a restart."""
    vllm_before, serve_before = vllm_started(), serve_state()
    with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
        rc, out = playbook("site.yml", inventory=both)
        assert rc == 0, out[-6000:]
        joined(PEERS)
        plan_unchanged(out)
        assert vllm_started() == vllm_before, "vLLM restarted for a node its plan does not use"
        wait_for(lambda: b_nodes().get(B_ADDRESS) == 1, timeout=300)
        assert sum(b_nodes().values()) == 4
        assert B_ADDRESS not in alive_ips()  # not a member of cluster default
        wait_for(lambda: scraped(B_ADDRESS), timeout=120)
        assert opens_to("ray-b-head", B_ADDRESS), f"the firewall of ray-b-head does not let {SIXTH} in"
        # Their weights came from the nodes that have them (model_distribution: peers), not from the controller.
        said = " ".join(out.split())
        # From every node that has them: both clusters serve tiny-llama (in the inventory's order).
        fetched = re.search(rf"{FIFTH}: fetching the weights from ([\w, -]+?)(;|'|\"|$)", said)
        assert fetched, out[-6000:]
        assert sorted(fetched.group(1).split(", then ")) == sorted([*PEERS, "ray-b-head"]), fetched.group(0)
        copied = [
            h for t, st, h in task_results(out) if "copy the weights from the controller" in t and st == "changed"
        ]
        assert copied == [], copied
    served(poller, "new hosts join both clusters")
    deployed, fixed = serve_state()
    assert len(fixed) == 2, fixed  # tiny-chat and the ingress
    assert (deployed, fixed) == serve_before, "Serve was sent a config or replaced replicas for a new node"
    # Installed without compiling: only what its own imports compiled has bytecode (every module, on the others).
    count = "find -L /opt/vllm/current/lib -name '*.{}' | wc -l"
    sources, compiled = int(sh(FIFTH, count.format("py"))), int(sh(FIFTH, count.format("pyc")))
    assert compiled < sources / 2, (sources, compiled)


def test_they_leave_with_one_remove_node_and_a_second_removal_changes_nothing(both):
    vllm_before = vllm_started()
    with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
        rc, out = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={FIFTH},{SIXTH}", inventory=both)
        assert rc == 0, out[-6000:]
        removed(out, f"{FIFTH}, {SIXTH}", "them")
        assert B_ADDRESS not in b_nodes() and sum(b_nodes().values()) == 3, out[-6000:]
        wait_for(lambda: not scraped(B_ADDRESS), timeout=120)
        assert not opens_to("ray-b-head", B_ADDRESS), f"the firewall of ray-b-head still lets {SIXTH} in"
    served(poller, "the new hosts leave")
    assert complete(url=CLUSTER_URLS["b"]) >= 1
    # Ray drained them (through their cluster's GCS, with its token) before they stopped, and says so in its record of
    # the node.
    assert f"Upgrade | Ray drains {FIFTH}]" in out and f"changed: [ray-head] => (item={ADDRESS})" in out
    assert f"Upgrade | Ray drains {SIXTH}]" in out and f"changed: [ray-b-head] => (item={B_ADDRESS})" in out
    dead = [n for n in ray_api("/api/v0/nodes?limit=1000&detail=1")["data"]["result"]["result"]
            if n["node_ip"] == ADDRESS and n["state"] == "DEAD"]  # fmt: skip
    last = max(dead, key=lambda n: n.get("end_time_ms") or 0)
    assert "preemption: leaving cluster default (rayvllm.fleet remove_node.yml)" in last["state_message"], last
    for host in (FIFTH, SIXTH):
        assert sh(host, "systemctl is-active ray-worker.service") != "active"
        assert sh(host, "systemctl is-enabled ray-worker.service") == "disabled"
    # vLLM had no rank there (it started before the node joined): it kept serving, and the run says so.
    assert "vLLM restarts on the GPUs of" not in out
    assert vllm_started() == vllm_before
    rc, again = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={FIFTH},{SIXTH}", inventory=both)
    recap, unchanged = ran(again)
    assert rc == 0 and FIFTH in recap and SIXTH in recap and unchanged, again[-4000:]


def test_a_limited_site_yml_brings_a_removed_node_back(inventory):
    """The operator's limited run: the node and its cluster's head (the monitoring host here too). The other nodes
    open their firewall to it at their next run (docs/operations.md)."""
    vllm_before = vllm_started()
    with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
        rc, out = playbook("site.yml", "--limit", f"{FIFTH},ray-head", inventory=inventory)
        assert rc == 0, out[-6000:]
        joined(("ray-head",))
        plan_unchanged(out)
    served(poller, "the removed host joins again with a limited site.yml")
    assert vllm_started() == vllm_before


def test_status_names_a_node_whose_ray_is_stopped_and_passes_once_it_is_back(inventory):
    """playbooks/status.yml (issue 29) with the node's Ray stopped: non-zero, naming the host; its Ray started again,
    it passes. The node holds no vLLM rank (vLLM started before it joined), so serving goes on throughout."""
    vllm_before = vllm_started()
    sh(FIFTH, "systemctl stop ray-worker.service")
    try:
        wait_for(lambda: ADDRESS not in alive_ips(), timeout=120)
        rc, out = playbook("playbooks/status.yml", inventory=inventory)
        assert rc != 0, out[-3000:]
        assert f"{FIFTH}: Ray node {ADDRESS} in cluster default: expected ALIVE, found not alive" in out, out[-3000:]
    finally:
        sh(FIFTH, "systemctl start ray-worker.service")
    wait_for(lambda: ADDRESS in alive_ips(), timeout=300)
    rc, out = playbook("playbooks/status.yml", inventory=inventory)
    assert rc == 0, out[-3000:]
    assert vllm_started() == vllm_before


def test_a_dead_server_is_removed_without_its_own_cleanup(inventory):
    subprocess.run(["docker", "kill", FIFTH], check=True, capture_output=True)
    with CompletionPoller(timeout=120, url=ROUTER_URL) as poller:
        rc, out = playbook("playbooks/remove_node.yml", "-e", f"remove_nodes={FIFTH}", inventory=inventory)
        assert rc == 0, out[-6000:]
        assert f"{FIFTH} did not answer" in out
        wait_for(lambda: ADDRESS not in alive_ips(), timeout=120)
        removed(out)
    served(poller, "a dead server is removed")


# What playbooks/reset.yml must leave nothing of on a Ray worker (the test's list, independent of the role's).
LEFTOVERS = {
    "units": "systemctl list-unit-files --no-legend 'ray-*' 'vllm*' rayvllm-firewall.service | awk '{print $1}'",
    "processes": "pgrep -af 'ray::|/raylet|/gcs_server|/opt/ray/|/opt/vllm/' | grep -v pgrep || true",
    "venvs and files": "ls -d /opt/ray /opt/vllm /opt/rayvllm /etc/ray /etc/vllm /etc/rayvllm /var/lib/ray"
    " /var/lib/vllm /usr/local/lib/rayvllm /var/cache/rayvllm /tmp/ray /run/vllm-watchdog"
    " /etc/sysctl.d/60-rayvllm.conf 2>/dev/null || true",
    "/dev/shm segments": "ls /dev/shm | grep -E '^(plasma|ray_|ray-|vllm|psm_|torch_)' || true",
    "firewall table": "nft list table inet rayvllm_fleet >/dev/null 2>&1 && echo 'table inet rayvllm_fleet' || true",
    "service account": "getent passwd ray; getent group ray; true",
}


def test_a_removed_dead_server_back_is_reset_to_nothing_of_ours(inventory):
    """The dead server comes back as it went down: its Ray enabled at boot, trying a cluster whose firewall no longer
    lets it in. The reset leaves nothing of ours on it, and a second reset changes nothing."""
    subprocess.run(["docker", "start", FIFTH], check=True, capture_output=True)
    booted(FIFTH)
    rc, out = playbook("playbooks/reset.yml", "--limit", FIFTH, "-e", "reset_confirm=yes", inventory=inventory)
    assert rc == 0, out[-6000:]
    left = {what: sh(FIFTH, command) for what, command in LEFTOVERS.items()}
    assert not any(left.values()), left
    rc, again = playbook("playbooks/reset.yml", "--limit", FIFTH, "-e", "reset_confirm=yes", inventory=inventory)
    assert rc == 0 and ran(again)[1], again[-4000:]
    assert ADDRESS not in alive_ips()
    assert complete() >= 1
