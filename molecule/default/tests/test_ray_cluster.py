"""The sandbox fleet runs a real Ray cluster: services, ports, nodes, GPUs, self-healing."""

from sandbox import ALL_NODE_IPS, HEADS, NODE_IPS, SETTINGS, alive_nodes

testinfra_hosts = ["ansible://ray_head", "ansible://ray_workers"]


def service_name(host):
    return "ray-head" if host.backend.get_hostname() in HEADS else "ray-worker"


def test_service_active_and_enabled(host):
    svc = host.service(service_name(host))
    assert svc.is_running
    assert svc.is_enabled


def test_service_runs_as_ray_user_from_versioned_venv(host):
    unit = host.file(f"/etc/systemd/system/{service_name(host)}.service").content_string
    # The unit runs the venv behind the `current` link (an upgrade switches the link, not the unit).
    assert "ExecStart=/opt/ray/current/bin/ray start --block" in unit
    assert "User=ray" in unit and "Restart=on-failure" in unit
    assert host.file("/opt/ray/current").linked_to == f"/opt/ray/{SETTINGS['ray_version']}"
    pid = host.check_output(f"systemctl show -p MainPID --value {service_name(host)}")
    assert f"/opt/ray/{SETTINGS['ray_version']}/" in host.file(f"/proc/{pid}/maps").content_string
    version = host.check_output("/opt/ray/current/bin/python -c 'import ray; print(ray.__version__)'")
    assert version == SETTINGS["ray_version"]


def test_pinned_ports_listening(host):
    ip = ALL_NODE_IPS[host.backend.get_hostname()]
    ports = [
        SETTINGS["ray_metrics_export_port"],
        SETTINGS["ray_node_manager_port"],
        SETTINGS["ray_object_manager_port"],
    ]
    if host.backend.get_hostname() in HEADS:
        ports += [SETTINGS["ray_gcs_port"], SETTINGS["ray_dashboard_port"]]
    listening = host.check_output("ss -Htln")
    for port in ports:
        assert f":{port} " in listening, f"port {port} not listening on {ip}"
    if host.backend.get_hostname() in HEADS:
        # The dashboard (and its job API) on the node's cluster address only, never a wildcard.
        dashboard = [
            line.split()[3]
            for line in listening.splitlines()
            if line.split()[3].endswith(f":{SETTINGS['ray_dashboard_port']}")
        ]
        assert dashboard == [f"{ip}:{SETTINGS['ray_dashboard_port']}"], dashboard


def test_open_files_limit(host):
    """The unit asks for 65536; the process gets that, or the machine's hard ceiling if lower.

    (This build machine caps every process at 20000 and containers cannot raise it.)"""
    svc = service_name(host)
    assert host.check_output(f"systemctl show -p LimitNOFILE --value {svc}") == "65536"
    ceiling = int(host.check_output("awk '/Max open files/ {print $5}' /proc/1/limits"))
    pid = host.check_output(f"systemctl show -p MainPID --value {svc}")
    soft = int(host.check_output(f"awk '/Max open files/ {{print $4}}' /proc/{pid}/limits"))
    assert soft == min(65536, ceiling)
    assert host.file("/etc/security/limits.d/60-rayvllm.conf").contains("ray hard nofile 65536")


def test_three_alive_nodes_and_six_gpus_through_the_api():
    nodes = alive_nodes()
    assert sorted(n["node_ip"] for n in nodes) == sorted(NODE_IPS.values())
    assert sum(n["resources_total"].get("GPU", 0) for n in nodes) == 6
    assert [n["node_ip"] for n in nodes if n["is_head_node"]] == [NODE_IPS["ray-head"]]


def test_each_node_advertises_its_cluster_address_and_interface(host):
    """Multi-NIC settings from the fleet model: vLLM's workers and NCCL/gloo use the node's Ray address."""
    name = host.backend.get_hostname()
    env = host.file("/etc/ray/ray.env").content_string
    assert f'VLLM_HOST_IP="{ALL_NODE_IPS[name]}"' in env
    iface = host.check_output(f"ip -o -4 addr show to {ALL_NODE_IPS[name]} | awk '{{print $2}}'")
    assert iface and f'GLOO_SOCKET_IFNAME="{iface}"' in env and f'NCCL_SOCKET_IFNAME="{iface}"' in env
    pid = host.check_output(f"systemctl show -p MainPID --value {service_name(host)}")
    environ = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ")
    assert f"VLLM_HOST_IP={ALL_NODE_IPS[name]}" in environ.splitlines()
    assert (
        f"--node-ip-address={ALL_NODE_IPS[name]}"
        in host.file(f"/etc/systemd/system/{service_name(host)}.service").content_string
    )
