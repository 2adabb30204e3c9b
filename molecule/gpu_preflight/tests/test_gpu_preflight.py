"""Preflight on a (stand-in) 8x H100 fleet: one broken host stops site.yml, named, before any change."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scenario_helpers import host_of, playbook  # noqa: E402

HOSTS = ("gpu-head", "gpu-worker-1", "gpu-worker-2")
FIXTURES = "/usr/local/share/fake-nvidia-smi"
testinfra_hosts = ["ansible://ray_head"]  # the tests drive the whole fleet from the controller


def site(*extra):
    return playbook("site.yml", *extra)


def nothing_installed():
    for name in HOSTS:
        h = host_of(name)
        assert not h.file("/opt/ray").exists, name
        assert not h.file("/etc/systemd/system/ray-head.service").exists, name
        assert not h.file("/etc/systemd/system/ray-worker.service").exists, name
        assert not h.user("ray").exists, name


@pytest.fixture
def broken(request):
    """Point one host's nvidia-smi at another recorded system; restore afterwards."""
    changed = []

    def use(name, system):
        host_of(name).run_expect([0], f"ln -sfn {FIXTURES}/{system} /etc/fake-nvidia-smi")
        changed.append(name)

    yield use
    for name in changed:
        host_of(name).run_expect([0], f"ln -sfn {FIXTURES}/h100-sxm5-nvswitch-8gpu /etc/fake-nvidia-smi")


def test_uniform_fleet_passed_preflight_without_installing_anything():
    rc, out = site("--tags", "preflight")
    assert rc == 0, out
    assert "GPU fleet OK on 3 hosts of cluster 'default' (gpu-head, gpu-worker-1, gpu-worker-2)" in out
    nothing_installed()


def test_worker_with_7_gpus_stops_site_yml(broken):
    broken("gpu-worker-2", "h100-sxm5-nvswitch-7gpu")
    rc, out = site()
    assert rc != 0
    assert "8 x NVIDIA H100 80GB HBM3, driver 550.127.05 on gpu-head, gpu-worker-1" in out
    assert "7 x NVIDIA H100 80GB HBM3, driver 550.127.05 on gpu-worker-2" in out
    assert "gpu-worker-2 has 7 GPUs but tensor parallel size 8" in out
    assert "PLAY [Host prep" not in out
    nothing_installed()


def test_worker_with_another_driver_stops_site_yml(broken):
    broken("gpu-worker-1", "h100-sxm5-nvswitch-8gpu-driver-535")
    rc, out = site()
    assert rc != 0
    assert "driver 535.216.01 on gpu-worker-1" in out
    assert "driver 550.127.05 on gpu-head, gpu-worker-2" in out
    nothing_installed()


def test_broken_nvlink_fails_the_tensor_parallel_group(broken):
    broken("gpu-worker-1", "h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down")
    rc, out = site()
    assert rc != 0
    assert "gpu-worker-1: tensor parallel groups of 8 would cross links that are not NVLink" in out
    nothing_installed()


def test_stopped_fabric_manager_is_named():
    head = host_of("gpu-head")
    head.run_expect([0], "systemctl stop nvidia-fabricmanager")
    try:
        rc, out = site()
    finally:
        head.run_expect([0], "systemctl start nvidia-fabricmanager")
    assert rc != 0
    assert "gpu-head has 8 NVLink-meshed GPUs (an NVSwitch system) but nvidia-fabricmanager is inactive" in out
    nothing_installed()
