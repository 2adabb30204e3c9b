"""The fleet model: several Ray clusters in one inventory, refused before any host changes when unusable."""

import re

from conftest import local_hosts

# Four hosts on this machine: cluster "alpha" (node-a head, node-b worker), cluster "beta" (node-c head, node-d).
HOSTS = ("node-a", "node-c"), ("node-b", "node-d")


def two_clusters(**hostvars):
    per_host = {
        "node-a": {"ray_cluster_name": "alpha"},
        "node-b": {"ray_cluster_name": "alpha"},
        "node-c": {"ray_cluster_name": "beta"},
        "node-d": {"ray_cluster_name": "beta"},
    }
    for host, extra in hostvars.items():
        per_host[host] = {**per_host[host], **extra}
    return local_hosts(head=HOSTS[0], workers=HOSTS[1], **per_host)


def test_two_clusters_pass_and_are_described(run_preflight):
    rc, out = run_preflight(two_clusters())
    assert rc == 0, out
    assert "Ray cluster alpha: head node-a (127.0.0.1), 1 worker (node-b)" in out
    assert "Ray cluster beta: head node-c (127.0.0.2), 1 worker (node-d)" in out


def test_an_inventory_without_cluster_names_is_one_cluster(run_preflight):
    rc, out = run_preflight(local_hosts(workers=("node-b", "node-c")))
    assert rc == 0, out
    assert "Ray cluster default: head node-a (127.0.0.1), 2 workers (node-b, node-c)" in out


def test_clusters_may_differ_from_each_other(run_preflight):
    beta = {"ray_version": "2.59.0", "vllm_port": 8100, "ray_gcs_port": 6380}
    rc, out = run_preflight(two_clusters(**{"node-c": beta, "node-d": beta}))
    assert rc == 0, out


def test_workers_of_a_cluster_without_a_head(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-d": {"ray_cluster_name": "gamma"}}))
    assert rc != 0
    assert "cluster 'gamma' has workers (node-d) but no head" in out
    assert "TASK [rayvllm.fleet.preflight" not in out


def test_two_heads_in_one_cluster(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-c": {"ray_cluster_name": "alpha"}}))
    assert rc != 0
    assert "cluster 'alpha' has 2 heads (node-a, node-c)" in out


def test_a_setting_that_differs_inside_a_cluster_names_cluster_hosts_and_values(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-d": {"ray_version": "2.59.0"}}))
    assert rc != 0
    assert (
        "cluster 'beta': ray_version must be the same on every node, but it is 2.59.0 on node-d; 2.60.0 on node-c"
        in out
    )


def test_ports_and_vllm_version_must_match_inside_a_cluster(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-b": {"ray_gcs_port": 6380, "vllm_version": "0.31.0"}}))
    assert rc != 0
    assert (
        "cluster 'alpha': vllm_version must be the same on every node, but it is 0.31.0 on node-b; 0.32.0 on node-a"
        in out
    )
    assert (
        "cluster 'alpha': ray_gcs_port must be the same on every node, but it is 6379 on node-a; 6380 on node-b" in out
    )


def test_node_ip_on_no_interface(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-b": {"ray_node_ip": "198.51.100.7"}}))
    assert rc != 0
    assert re.search(
        r"ray_node_ip 198\.51\.100\.7 is on no interface of node-b \(its addresses: .*lo 127\.0\.0\.1", out
    ), out


def test_two_hosts_with_one_address(run_preflight):
    rc, out = run_preflight(two_clusters(**{"node-d": {"ray_node_ip": "127.0.0.1"}}))
    assert rc != 0
    assert "node-a, node-d share the address 127.0.0.1 (ray_node_ip)" in out


def test_bad_cluster_name(run_preflight):
    rc, out = run_preflight(
        two_clusters(**{"node-a": {"ray_cluster_name": "al pha"}, "node-b": {"ray_cluster_name": "al pha"}})
    )
    assert rc != 0
    assert "ray_cluster_name 'al pha' on node-a is not a usable cluster name" in out


def test_a_limited_run_sees_the_whole_cluster(run_preflight):
    """--limit to one worker: its head's address and the other cluster still come from the inventory and facts."""
    rc, out = run_preflight(two_clusters(), extra_args=["--limit", "node-d"])
    assert rc == 0, out
    assert "Ray cluster beta: head node-c (127.0.0.2), 1 worker (node-d)" in out
    assert "Ray cluster alpha: head node-a (127.0.0.1), 1 worker (node-b)" in out
    assert "node-a" not in out.split("PLAY RECAP")[1]


def with_router(inventory, **router_vars):
    """node-a also in group router (vllm-router in front of the clusters serving each model)."""
    inventory["all"]["children"]["router"] = {"hosts": {"node-a": dict(router_vars)}}
    return inventory


def test_two_models_on_one_router_port_are_refused_before_any_host_changes(run_preflight):
    ports = {"llama": {"port": 31000, "metrics_port": 29000}, "qwen": {"port": 31000, "metrics_port": 29001}}
    inventory = two_clusters(**{h: {"vllm_served_model_name": "llama" if h < "node-c" else "qwen"} for h in
                                ("node-a", "node-b", "node-c", "node-d")})  # fmt: skip
    rc, out = run_preflight(with_router(inventory, router_model_ports=ports))
    assert rc != 0
    assert "port 31000 on router host node-a is wanted by llama's router port, qwen's router port" in out
    assert "TASK [rayvllm.fleet.preflight" not in out


def test_a_router_port_taken_by_vllm_on_its_host_is_refused(run_preflight):
    served = {"vllm_served_model_name": "llama"}
    inventory = two_clusters(**{h: served for h in ("node-a", "node-b", "node-c", "node-d")})
    rc, out = run_preflight(with_router(inventory, router_port=8000))
    assert rc != 0
    assert "port 8000 on router host node-a is wanted by front door (router_port), vLLM" in out


def test_clusters_behind_one_router_with_different_api_keys_are_refused_without_showing_a_key(run_preflight):
    served = {"vllm_served_model_name": "llama"}
    hostvars = {h: served for h in ("node-a", "node-b", "node-c", "node-d")}
    for head, key in (("node-a", "alpha-key-0123456789abcdef"), ("node-c", "beta-key-0123456789abcdef")):
        hostvars[head] = {**served, "vllm_api_key": key}
    rc, out = run_preflight(with_router(two_clusters(**hostvars)))
    assert rc != 0
    assert "the clusters behind the llama router serve with different vLLM API keys" in out, out[-3000:]
    assert "key 1 set in the inventory on" in out and "key 2 set in the inventory on" in out
    assert "alpha-key" not in out and "beta-key" not in out
    assert "TASK [rayvllm.fleet.preflight" not in out


def test_clusters_behind_one_router_with_different_tool_call_parsers_are_refused(run_preflight):
    served = {"vllm_served_model_name": "llama"}
    hostvars = {h: served for h in ("node-a", "node-b", "node-c", "node-d")}
    hostvars["node-a"] = {**served, "vllm_extra_args": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]}
    hostvars["node-c"] = {**served, "vllm_extra_args": ["--enable-auto-tool-choice", "--tool-call-parser=llama3_json"]}
    rc, out = run_preflight(with_router(two_clusters(**hostvars)))
    assert rc != 0
    assert (
        "the clusters behind the llama router start vLLM with different --tool-call-parser in vllm_extra_args "
        "('hermes' on alpha; 'llama3_json' on beta)" in " ".join(out.split())
    ), out[-3000:]
    assert "--enable-auto-tool-choice in vllm_extra_args" not in out
    assert "TASK [rayvllm.fleet.preflight" not in out
