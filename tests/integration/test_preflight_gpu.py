"""GPU fleet checks in preflight, on a stand-in nvidia-smi that answers from recorded outputs.

Each local "host" gets its own wrapper around tests/unit/fixtures/nvidia-smi/fake-nvidia-smi,
pointing at a copy of one recorded system (optionally edited: fewer GPUs, another driver).
"""

import shutil
import stat

import pytest
from conftest import ROOT, local_hosts

SMI = ROOT / "tests/unit/fixtures/nvidia-smi"
GPU_VARS = {"preflight_gpu_check": True}


def stand_in(tmp_path, host, system, drop_last_gpu=False, driver=None):
    """Write <tmp>/<host>/nvidia-smi answering like ``system``; return its path."""
    folder = tmp_path / host
    shutil.copytree(SMI / system, folder / "fixture")
    query = folder / "fixture/query.csv"
    lines = query.read_text().splitlines()
    if drop_last_gpu:
        lines = lines[:-1]
        topo = (folder / "fixture/topo.txt").read_text().splitlines()
        gpus = len(lines)
        out = []
        for line in topo:
            cells = line.split("\t")
            if cells and cells[0].strip() == "GPU%d" % gpus:
                continue  # the missing GPU's row
            if len(cells) > gpus + 1 and (cells[0] == "" or cells[0].startswith(("GPU", "NIC"))):
                del cells[gpus + 1]  # and its column
            out.append("\t".join(cells))
        (folder / "fixture/topo.txt").write_text("\n".join(out) + "\n")
    if driver:
        lines = [", ".join(c if i != 5 else driver for i, c in enumerate(line.split(", "))) for line in lines]
    query.write_text("\n".join(lines) + "\n")
    wrapper = folder / "nvidia-smi"
    wrapper.write_text(
        '#!/bin/sh\nFAKE_NVIDIA_SMI_DIR="%s" exec "%s" "$@"\n' % (folder / "fixture", SMI / "fake-nvidia-smi")
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def fleet(tmp_path, system="l40s-pcie-4gpu", **odd):
    """node-a (head), node-b, node-c on ``system``; ``odd`` = {host: stand_in kwargs}."""
    hostvars = {}
    for host in ("node-a", "node-b", "node-c"):
        hostvars[host] = {"preflight_nvidia_smi": stand_in(tmp_path, host, system, **odd.get(host, {}))}
    return local_hosts(head=("node-a",), workers=("node-b", "node-c"), **hostvars)


def test_uniform_fleet_passes_and_says_so(run_preflight, tmp_path):
    rc, out = run_preflight(fleet(tmp_path), {**GPU_VARS, "preflight_tensor_parallel_size": 4})
    assert rc == 0, out
    assert "GPU fleet OK on 3 hosts of cluster 'default' (node-a, node-b, node-c)" in out


def test_hosts_without_gpus_skip_and_say_so(run_preflight):
    rc, out = run_preflight(local_hosts())
    assert rc == 0, out
    # Said once, naming every host that skipped them.
    assert out.count("GPU topology checks skipped on") == 1, out
    skipped = out.split("GPU topology checks skipped on", 1)[1].split(": preflight_gpu_check is false", 1)[0]
    assert "node-a" in skipped and "node-b" in skipped, out


def test_worker_with_a_missing_gpu_is_named(run_preflight, tmp_path):
    rc, out = run_preflight(fleet(tmp_path, **{"node-c": {"drop_last_gpu": True}}), GPU_VARS)
    assert rc != 0
    assert "the GPU fleet is not uniform" in out
    assert "3 x NVIDIA L40S, driver 570.86.15 on node-c" in out
    assert "4 x NVIDIA L40S, driver 570.86.15 on node-a, node-b" in out


def test_worker_with_another_driver_is_named(run_preflight, tmp_path):
    rc, out = run_preflight(fleet(tmp_path, **{"node-b": {"driver": "535.216.01"}}), GPU_VARS)
    assert rc != 0
    assert "driver 535.216.01 on node-b" in out


def test_expected_count_fails_on_the_host(run_preflight, tmp_path):
    rc, out = run_preflight(
        fleet(tmp_path, **{"node-c": {"drop_last_gpu": True}}), {**GPU_VARS, "preflight_gpu_count": 4}
    )
    assert rc != 0
    assert "fatal: [node-c]" in out and "expected 4 GPUs, found 3" in out


def test_tensor_parallel_larger_than_a_node(run_preflight, tmp_path):
    rc, out = run_preflight(fleet(tmp_path), {**GPU_VARS, "preflight_tensor_parallel_size": 8})
    assert rc != 0
    assert "node-a has 4 GPUs but tensor parallel size 8 needs 8 on one node" in out


def test_nvlink_required_on_pcie_fleet(run_preflight, tmp_path):
    rc, out = run_preflight(
        fleet(tmp_path), {**GPU_VARS, "preflight_tensor_parallel_size": 2, "preflight_require_nvlink": True}
    )
    assert rc != 0
    assert "node-a: tensor parallel groups of 2 would cross links that are not NVLink" in out


def test_ray_num_gpus_above_the_real_count(run_preflight, tmp_path):
    rc, out = run_preflight(fleet(tmp_path), {**GPU_VARS, "ray_num_gpus": 8})
    assert rc != 0
    assert "declares ray_num_gpus=8 but nvidia-smi shows 4 GPUs" in out


def test_nvswitch_without_fabric_manager(run_preflight, tmp_path):
    # This machine has no nvidia-fabricmanager unit: an H100 NVSwitch board must fail on it.
    rc, out = run_preflight(fleet(tmp_path, system="h100-sxm5-nvswitch-8gpu"), GPU_VARS)
    assert rc != 0
    assert "an NVSwitch system" in out and "systemctl enable --now nvidia-fabricmanager" in out


@pytest.mark.parametrize("check", [False])
def test_fabric_manager_check_can_be_disabled(run_preflight, tmp_path, check):
    rc, out = run_preflight(
        fleet(tmp_path, system="h100-sxm5-nvswitch-8gpu"), {**GPU_VARS, "preflight_fabric_manager_check": check}
    )
    assert rc == 0, out


def test_missing_driver(run_preflight):
    rc, out = run_preflight(
        local_hosts(**{"node-b": {"preflight_nvidia_smi": "/nonexistent/nvidia-smi"}}),
        {"preflight_gpu_check": True, "preflight_fabric_manager_check": False},
    )
    assert rc != 0
    assert "fatal: [node-b]" in out and "NVIDIA driver is missing" in out
