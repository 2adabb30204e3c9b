"""Run the real preflight playbook against throw-away inventories on this machine.

Hosts use the local connection, so no containers are needed: these tests prove
that bad inventories fail in preflight with a message that names the fix, and
that nothing ran after preflight.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).with_name("ansible-playbook"))


@pytest.fixture
def run_preflight(tmp_path):
    def run(hosts_yml, group_vars=None, playbook="playbooks/preflight.yml"):
        inv = tmp_path / "inventory"
        (inv / "group_vars").mkdir(parents=True, exist_ok=True)
        (inv / "hosts.yml").write_text(yaml.safe_dump(hosts_yml))
        base = {
            "ray_version": "2.60.0",
            "preflight_min_shm_mib": 1,
            "preflight_check_ports": False,
            "preflight_gpu_check": False,
            "vllm_version": "0.32.0",
            "model_source": "shared",
            "model_path": "/srv/models/example",
        }
        base.update(group_vars or {})
        (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(base))
        env = dict(
            os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default"
        )
        proc = subprocess.run(
            [ANSIBLE_PLAYBOOK, "-i", str(inv), str(ROOT / playbook)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return proc.returncode, proc.stdout + proc.stderr

    return run


def local_hosts(head=("node-a",), workers=("node-b",), **hostvars):
    def host(name):
        return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **hostvars.get(name, {})}

    groups = {"ray_workers": {"hosts": {w: host(w) for w in workers}}}
    if head:
        groups["ray_head"] = {"hosts": {h: host(h) for h in head}}
    return {"all": {"children": groups}}
