"""The thin filters over module_utils: each wraps its function and turns its errors into filter errors."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.rayvllm.fleet.plugins.filter import env_file, gpu_fleet, grafana_dashboard, listen_url
from ansible_collections.rayvllm.fleet.plugins.filter import upgrade_plan


def test_listen_url():
    assert listen_url.listen_url("0.0.0.0:9090") == "http://127.0.0.1:9090"
    with pytest.raises(AnsibleFilterError, match="listen_url: '9090' is not HOST:PORT"):
        listen_url.listen_url("9090")


def test_env_file():
    assert env_file.env_file({"A": "b c"}) == 'A="b c"\n'
    with pytest.raises(AnsibleFilterError, match="env_file"):
        env_file.env_file({"A": "b\nc"})


def test_gpu_fleet():
    facts = {"gpu_count": 8, "nvlink_full_mesh": True, "gpus": [], "driver_version": "550"}
    assert gpu_fleet.gpu_needs_fabric_manager(facts) is True
    with pytest.raises(AnsibleFilterError, match="gpu_needs_fabric_manager expects a gpu_topology result"):
        gpu_fleet.gpu_needs_fabric_manager({})
    with pytest.raises(AnsibleFilterError, match="expects a dict"):
        gpu_fleet.gpu_fleet_problems([])


def test_grafana_dashboard():
    assert grafana_dashboard.grafana_dashboard_problems({"uid": "d", "title": "D", "panels": []}, "uid") == []
    with pytest.raises(AnsibleFilterError, match="needs the provisioned datasource uid"):
        grafana_dashboard.grafana_dashboard_problems({}, "")


def test_upgrade_plan_takes_the_nodes_first():
    """`nodes | upgrade_plan(cluster, outside=hosts)`: the piped nodes first, then the cluster's name (module_utils'
    cluster_plan takes them the other way round), then the hosts outside the run, by keyword."""
    ray = {"link": "/opt/ray/current", "current": "/opt/ray/2.59.0", "target": "/opt/ray/2.59.0"}
    vllm = {"link": "/opt/vllm/current", "current": "/opt/vllm/0.31.0", "target": "/opt/vllm/0.32.0"}

    def nodes():  # any iterable: the filter makes it a list, which the plan reads more than once
        return ({"host": host, "python": "3.11.2", "ray": dict(ray), "vllm": dict(vllm)} for host in ("head", "w1"))

    plan = upgrade_plan.upgrade_plan(nodes(), "gpu-a")
    assert (plan["cluster"], plan["action"], plan["problems"]) == ("gpu-a", "vllm", [])
    assert plan["changes"] == {"ray": [], "vllm": ["head", "w1"], "model": []}
    assert [(e["host"], e["link"], e["target"]) for e in plan["switch"]] == [
        ("head", "/opt/vllm/current", "/opt/vllm/0.32.0"),
        ("w1", "/opt/vllm/current", "/opt/vllm/0.32.0"),
    ]
    assert "cluster gpu-a: vLLM 0.31.0 -> 0.32.0 on head, w1" in plan["lines"]

    refused = upgrade_plan.upgrade_plan(nodes(), "gpu-a", outside=["w2"])
    assert len(refused["problems"]) == 1
    assert refused["problems"][0].startswith("cluster gpu-a: vLLM or its weights change on head, w1, which restarts")
    assert "but w2 is outside this run (--limit)" in refused["problems"][0]


def test_account_in_place():
    from ansible_collections.rayvllm.fleet.plugins.filter import account_in_place

    accounts = {
        "users": {"ray": {"gid": 5, "home": "/var/lib/ray", "shell": "/bin/sh", "home_exists": True}},
        "groups": {"ray": {"gid": 5, "members": []}},
    }
    assert account_in_place.account_in_place(accounts, user="ray", group="ray", home="/var/lib/ray")
    assert not account_in_place.account_in_place(accounts, user="ray", shell="/usr/sbin/nologin")
    assert not account_in_place.account_in_place(None, group="ray")
