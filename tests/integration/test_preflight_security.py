"""Insecure or unsafe settings fail in preflight, before any host changes, naming the variable and the fix;
secrets are generated once beside the inventory and never shown."""

import stat

from conftest import local_hosts


def test_keys_and_tokens_are_generated_once_beside_the_inventory(run_preflight, tmp_path):
    rc, out = run_preflight(local_hosts())
    assert rc == 0, out
    credentials = tmp_path / "inventory/credentials/default"
    files = {p.name: p for p in credentials.iterdir()}
    assert sorted(files) == ["ray_auth_token", "vllm_api_key"]
    first = {name: p.read_text() for name, p in files.items()}
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first["ray_auth_token"].strip()) == 64 and len(first["vllm_api_key"].strip()) == 48
    assert not any(value.strip() in out for value in first.values())
    rc, out = run_preflight(local_hosts())
    assert rc == 0, out
    assert {name: p.read_text() for name, p in files.items()} == first


def test_an_empty_api_key_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_api_key": ""})
    assert rc != 0
    assert "vllm_api_key on node-a is empty, shorter than 16 characters" in out
    assert "Remove the setting to have a key generated" in out


def test_a_newline_in_a_unit_value_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_served_model_name": "tiny\nExecStartPre=+/bin/sh -c id"})
    assert rc != 0
    assert "vllm_served_model_name (contains a newline)" in out


def test_a_newline_in_the_ray_environment_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_environment": {"NCCL_DEBUG": "INFO\nExecStartPre=+/bin/id"}})
    assert rc != 0
    assert "ray_environment.NCCL_DEBUG (contains a newline)" in out


def test_ray_as_root_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_user": "root"})
    assert rc != 0
    assert "ray_user/ray_group on node-a is root" in out


def test_a_short_ray_token_is_refused_without_showing_it(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_auth_token": "hunter2hunter2"})
    assert rc != 0
    assert "ray_auth_token must be at least 32 characters" in out
    assert "hunter2hunter2" not in out


def test_auth_mode_differing_inside_a_cluster_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(**{"node-b": {"ray_auth_mode": "disabled"}}))
    assert rc != 0
    assert "ray_auth_mode must be the same on every node, but it is disabled on node-b; token on node-a" in out


def test_a_firewall_source_that_is_no_address_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"firewall_admin_cidrs": ["office"], "vllm_allowed_cidrs": ["10.0.0.0/33"]})
    assert rc != 0
    assert "firewall_admin_cidrs: 'office' is not an IP address or network" in out
    assert "'10.0.0.0/33' is not an IP address or network" in out


def test_a_ray_temp_dir_in_the_private_tmp_is_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_temp_dir": "/tmp/ray"})
    assert rc != 0
    assert "ray_temp_dir=/tmp/ray on node-a is under /tmp or /var/tmp" in out
    assert "set PrivateTmp to" in out


def test_vllm_sockets_in_the_private_tmp_are_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_environment": {"VLLM_RPC_BASE_PATH": "/tmp"}})
    assert rc != 0
    assert "vllm_environment.VLLM_RPC_BASE_PATH under /tmp or /var/tmp" in out
    assert "would hang at start" in out


def test_ray_environment_cannot_switch_token_auth_off_on_one_node(run_preflight):
    rc, out = run_preflight(local_hosts(**{"node-b": {"ray_environment": {"RAY_AUTH_MODE": "disabled"}}}))
    assert rc != 0
    assert "ray_environment on node-b sets RAY_AUTH_MODE, which would override the cluster's token" in out


def test_a_node_with_a_token_of_its_own_is_refused_without_showing_either(run_preflight):
    token = "x" * 40
    rc, out = run_preflight(local_hosts(**{"node-b": {"ray_auth_token": token}}))
    assert rc != 0
    assert "ray_auth_token on node-b differs from the one of node-a, the head of cluster default" in out
    assert token not in out


def test_vllm_as_root_and_a_key_in_vllm_environment_are_refused(run_preflight):
    rc, out = run_preflight(local_hosts(), {"vllm_user": "root", "vllm_environment": {"VLLM_API_KEY": "k" * 20}})
    assert rc != 0
    assert "vllm_user/vllm_group must not be root (got root/" in out
    assert "vllm_environment must not set VLLM_API_KEY" in out
    assert "k" * 20 not in out


def test_admin_services_open_to_every_address_need_the_opt_in(run_preflight):
    rc, out = run_preflight(local_hosts(), {"firewall_admin_cidrs": ["10.0.0.0/8", "0.0.0.0/0"]})
    text = " ".join(out.split())
    assert rc != 0
    assert "firewall_admin_cidrs on node-a holds 0.0.0.0/0, every address" in text
    assert "set firewall_admin_open_to_all: true" in text


def test_flags_the_ray_role_sets_and_resources_ray_counts_are_refused(run_preflight):
    rc, out = run_preflight(
        local_hosts(),
        {
            "ray_extra_start_args": ["--dashboard-port=9999"],
            "ray_resources": {"GPU": 8},
            "ray_object_store_memory": 10**15,
        },
    )
    text = " ".join(out.split())
    assert rc != 0
    assert "ray_extra_start_args on node-a sets --dashboard-port, which the ray role sets itself" in text
    assert "ray_resources on node-a names GPU, which Ray counts itself" in text
    assert "ray_object_store_memory on node-a is 1000000000000000 bytes" in text  # more than this machine's memory


def test_firewall_ports_of_the_wrong_shape_are_refused(run_preflight):
    rules = [{"ports": [70000], "sources": ["10.0.0.0/8"]}]
    rc, out = run_preflight(local_hosts(), {"firewall_ssh_port": "22/tcp", "firewall_extra_rules": rules})
    text = " ".join(out.split())
    assert rc != 0
    assert "firewall_ssh_port on node-a is '22/tcp': give the port number alone, 1-65535" in text
    assert "firewall_extra_rules[0]: [70000] are not ports or port ranges of 1-65535" in text
