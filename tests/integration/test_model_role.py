"""The model role on this machine (local connection): copy from the controller, idempotence, free-space check."""

import subprocess
import sys

from conftest import ROOT, local_hosts

TINY_LLAMA = ROOT / "tests/fixtures/vllm-cpu/tiny_llama.py"


def setup(tmp_path, **extra):
    source = tmp_path / "controller-copy"
    subprocess.run([sys.executable, str(TINY_LLAMA), str(source)], check=True, capture_output=True)
    playbook = tmp_path / "model.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [rayvllm.fleet.fleet_facts, rayvllm.fleet.model]\n"
    )
    group_vars = {
        "model_source": "controller",
        "model_controller_path": str(source),
        "model_path": str(tmp_path / "node" / "srv" / "models" / "tiny"),
        "model_owner": "root",
        "model_group": "root",
        **extra,
    }
    return str(playbook), group_vars


def test_copy_then_nothing_to_do(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    hosts = local_hosts(head=("node-a",), workers=())
    rc, out = run_preflight(hosts, group_vars, playbook=playbook)
    assert rc == 0, out
    assert (tmp_path / "node/srv/models/tiny/config.json").is_file()
    assert "changed=2" in out  # the directory and the copy
    rc, out = run_preflight(hosts, group_vars, playbook=playbook)
    assert rc == 0, out
    assert "changed=0" in out


def test_short_disk_fails_before_copying(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path, model_free_space_margin_gib=10**7)
    rc, out = run_preflight(local_hosts(head=("node-a",), workers=()), group_vars, playbook=playbook)
    assert rc != 0
    assert "but staging" in out and "GiB (weights still missing plus a 10000000 GiB margin)" in out
    assert not (tmp_path / "node/srv/models/tiny").exists()
