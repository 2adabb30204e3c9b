"""The ray_cluster_wait module, run on the head against the live cluster."""

from sandbox import NODE_IPS, RAY_TOKEN_FILE, SETTINGS

testinfra_hosts = ["ansible://ray-head"]  # cluster default's head (cluster b: tests/test_router.py)


def run_failing_module(host, args):
    """Run ray_cluster_wait expecting failure; return its result.

    testinfra raises AnsibleException when the result says failed, but on
    ansible-core 2.19 the key can be missing: accept either, then the caller
    checks the message (a successful run has none)."""
    try:
        result = host.ansible("rayvllm.fleet.ray_cluster_wait", args, check=True)
    except host.ansible.AnsibleException as exc:
        result = exc.result
    assert result.get("msg"), f"expected a failure, got {result}"
    return result


def test_cluster_wait_module_sees_the_cluster(host):
    result = host.ansible(
        "rayvllm.fleet.ray_cluster_wait",
        f"dashboard_url=http://{NODE_IPS['ray-head']}:{SETTINGS['ray_dashboard_port']} min_nodes=3 min_gpus=6 "
        f"timeout=30 token_file={RAY_TOKEN_FILE}",
        check=True,
    )
    assert result["alive_nodes"] == 3 and result["total_gpus"] == 6.0 and result["missing_ips"] == []
    assert result["changed"] is False


def test_cluster_wait_module_fails_with_shortfall(host):
    result = run_failing_module(
        host,
        f"dashboard_url=http://{NODE_IPS['ray-head']}:{SETTINGS['ray_dashboard_port']} min_nodes=4 min_gpus=8 "
        f"expected_ips=10.77.0.99 timeout=3 interval=1 token_file={RAY_TOKEN_FILE}",
    )
    assert "3/4 ALIVE nodes" in result["msg"] and "6/8 GPUs" in result["msg"] and "10.77.0.99" in result["msg"]


def test_cluster_wait_module_reports_unreachable_dashboard(host):
    result = run_failing_module(
        host,
        "dashboard_url=http://127.0.0.1:1 min_nodes=1 timeout=2 interval=1",
    )
    assert "unreachable" in result["msg"] and "0/1" not in result["msg"]


def test_cluster_wait_module_names_a_refused_token(host):
    result = run_failing_module(
        host,
        f"dashboard_url=http://{NODE_IPS['ray-head']}:{SETTINGS['ray_dashboard_port']} min_nodes=1 timeout=2 "
        "interval=1 token=not-the-cluster-token",
    )
    assert "401" in result["msg"] or "403" in result["msg"], result["msg"]
    assert "token" in result["msg"]
