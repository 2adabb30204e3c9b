"""Bad inventories fail in preflight, before any host changes, naming the fix."""

import re
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import local_hosts


def test_good_inventory_passes(run_preflight):
    rc, out = run_preflight(local_hosts())
    assert rc == 0, out
    assert "failed=0" in out


def test_no_head(run_preflight):
    rc, out = run_preflight(local_hosts(head=()))
    assert rc != 0
    assert "cluster 'default' has workers (node-b) but no head: put one of its hosts in ray_head" in out


def test_two_heads(run_preflight):
    rc, out = run_preflight(local_hosts(head=("node-a", "node-c")))
    assert rc != 0
    assert "cluster 'default' has 2 heads (node-a, node-c): a Ray cluster has exactly one" in out


def test_host_in_both_groups(run_preflight):
    inventory = local_hosts(head=("node-a",), workers=("node-b",))
    inventory["all"]["children"]["ray_workers"]["hosts"]["node-a"] = None
    rc, out = run_preflight(inventory)
    assert rc != 0
    assert "node-a is in both ray_head and ray_workers" in out


# One case: preflight stops on it. Every unpinned value: tests/unit/.../inputs/test_version_inputs.py.
def test_unpinned_ray_version(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_version": "latest"})
    assert rc != 0
    assert "ray_version must be an exact X.Y.Z release" in out
    assert 'ray_version: "2.60.0"' in out


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("ray_stop_drain_timeout", "soon", "(seconds a node drains on SIGTERM); got 'soon'"),
        ("vllm_stop_timeout", -1, "(seconds systemd waits for vLLM to stop); got '-1'"),
    ],
)
def test_stop_timeouts_must_be_counts(run_preflight, name, value, message):
    rc, out = run_preflight(local_hosts(), {name: value})
    assert rc != 0
    assert f"{name} must be a whole number, 0 or more {message}" in out


def interpreter_version(interpreter):
    """The X.Y.Z an interpreter reports, asked the way preflight asks (plugins/module_utils/backends/host_probe.py)."""
    argv = [interpreter, "-c", "import platform; print(platform.python_version())"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_mismatched_python(run_preflight):
    """node-a runs Ray under PyPy (Python 3.9 on Debian 12), node-b under the controller's Python: a real mix."""
    pypy = shutil.which("pypy3")
    assert pypy, "this test needs a second Python of another version: apt-get install pypy3"
    other, ours = interpreter_version(pypy), interpreter_version(sys.executable)
    assert other != ours, f"pypy3 runs Python {other}, as the controller does: no mix to refuse"
    rc, out = run_preflight(
        local_hosts(
            **{
                "node-a": {"ray_python_interpreter": pypy},
                "node-b": {"ray_python_interpreter": sys.executable},
            }
        )
    )
    text = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert "Ray refuses to mix Python versions inside a cluster" in text, out[-3000:]
    # plugins/module_utils/fleet_model/clusters.py mixed_within_clusters: "cluster 'c': Python X.Y.Z on h1; ...".
    assert "cluster 'default': Python " in text, out[-3000:]
    assert f"Python {other} on node-a" in text and f"Python {ours} on node-b" in text, out[-3000:]


def test_missing_interpreter(run_preflight):
    rc, out = run_preflight(local_hosts(**{"node-b": {"ray_python_interpreter": "/nonexistent/python3"}}))
    assert rc != 0
    assert "/nonexistent/python3 does not run on node-b" in out


def test_small_shm(run_preflight):
    rc, out = run_preflight(local_hosts(), {"preflight_min_shm_mib": 10_000_000})
    assert rc != 0
    assert "/dev/shm on node-a is" in out and "need at least 10000000 MiB" in out


def test_overlapping_ports(run_preflight):
    rc, out = run_preflight(local_hosts(), {"ray_metrics_export_port": 10500})
    assert rc != 0
    # The fleet model's table of services names it first (the run stops there, before the ray role's checks).
    assert "port 10500 of the Ray metrics (ray_metrics_export_port) on node-a lies in Ray's worker port range" in out


def test_two_services_of_a_head_on_one_port(run_preflight):
    """vLLM and Ray's client server both want 10001 on the head: named with both variables, before any change."""
    rc, out = run_preflight(local_hosts(), {"vllm_port": 10001})
    assert rc != 0
    assert "port 10001 on node-a is wanted by" in out
    assert "vLLM API (vllm_port)" in out and "(ray_client_server_port)" in out


@pytest.mark.parametrize(
    "values, message",
    [
        # A port out of range: the fleet model's table had computed it and dropped it (accepted).
        ({"ray_dashboard_port": 70000}, "ray_dashboard_port on node-a is 70000: not a port number (a whole number"),
        # Not a number: the fleet model names it (the vllm role's one message listed every requirement).
        ({"vllm_port": "8000/tcp"}, "vllm_port on node-a is '8000/tcp': not a port number"),
        # TP above the GPUs the cluster declares, PP left auto (only TP and PP both set were counted).
        ({"ray_num_gpus": 1, "vllm_tensor_parallel_size": 8},
         "Cluster 'default' declares 2 GPUs (ray_num_gpus 1+1), but vllm_tensor_parallel_size 8 x"),
        # A type no role check looks at, against the role's argument spec: a string for a list passed preflight
        # (Ansible's validator splits it on commas), then the venv task uninstalled t, o, r, c, h, ...
        ({"vllm_pip_remove": "torchvision"},
         "vllm_pip_remove on node-a must be a list of strings (roles/vllm/meta/argument_specs.yml), got "
         "'torchvision' (a string)"),
        # The same for a role without input checks of its own (host_prep), checked by preflight on every host.
        ({"host_prep_extra_packages": "htop"},
         "host_prep_extra_packages on node-a must be a list of strings (roles/host_prep/meta/argument_specs.yml), "
         "got 'htop' (a string)"),
        # The fleet model's own inventory variables, against fleet_facts' argument spec (checked with the model).
        ({"ray_cluster_name": ["a", "b"]},
         "ray_cluster_name on node-a must be a string (roles/fleet_facts/meta/argument_specs.yml), got ['a', 'b']"),
        # A relative directory a role writes: created under the task's working directory, written into the unit.
        ({"model_revisions_dir": "revisions"}, "model_revisions_dir on node-a is 'revisions': not an absolute path"),
    ],
    ids=["port-out-of-range", "port-not-a-number", "tp-above-declared-gpus", "string-for-a-list",
         "string-for-a-list-host-prep", "list-for-a-cluster-name", "relative-directory"],
)  # fmt: skip
def test_unusable_ports_and_gpu_plans_are_named(run_preflight, values, message):
    rc, out = run_preflight(local_hosts(), values)
    assert rc != 0
    assert message in " ".join(out.split()), out[-3000:]


def test_site_stops_after_preflight(run_preflight):
    """With a bad inventory, site.yml never reaches host_prep."""
    rc, out = run_preflight(local_hosts(head=()), playbook="site.yml")
    assert rc != 0
    assert "TASK [rayvllm.fleet.host_prep" not in out


def test_port_taken_by_another_program(run_preflight):
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        port = sock.getsockname()[1]
        rc, out = run_preflight(
            local_hosts(),
            {
                "preflight_check_ports": True,
                "ray_metrics_export_port": port,
                "ray_min_worker_port": 2000,
                "ray_max_worker_port": 2999,
            },
        )
    assert rc != 0
    # The program's name as the kernel has it (this test's own process: pytest, or python with -m pytest), its pid.
    assert re.search(rf"Ray's ports are taken by other programs: {port} by (pytest|python[0-9.]*) \(pid \d+", out), out
