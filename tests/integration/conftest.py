"""Run the real preflight playbook against throw-away inventories on this machine.

Hosts use the local connection, so no containers are needed: these tests prove
that bad inventories fail in preflight with a message that names the fix, and
that nothing ran after preflight.
"""

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).with_name("ansible-playbook"))
# How long one ansible-playbook run may take before the test fails as hung. scripts/test.sh raises it: there these
# tests run at the CPU's idle priority beside the sandbox, and a run may wait minutes for a free core.
PLAYBOOK_TIMEOUT = int(os.environ.get("RAYVLLM_INTEGRATION_TIMEOUT", "300"))


# Every throw-away host runs on this machine, and the fleet model requires each Ray node to
# have its own address on one of its interfaces: each gets 127.0.0.N, held by the loopback.
LOOPBACK_ADDRESSES = [f"127.0.0.{n}" for n in range(1, 9)]


@pytest.fixture(scope="session", autouse=True)
def loopback_addresses():
    """127.0.0.2-8 as secondary loopback addresses for the test's run (needs root, as CI runs)."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True, check=True
    ).stdout
    added = []
    for address in LOOPBACK_ADDRESSES[1:]:
        if f"inet {address}/" not in shown:
            subprocess.run(["ip", "addr", "add", f"{address}/8", "dev", "lo"], check=True)
            added.append(address)
    yield
    for address in added:
        subprocess.run(["ip", "addr", "del", f"{address}/8", "dev", "lo"], check=False)


@pytest.fixture
def run_preflight(tmp_path):
    def run(hosts_yml, group_vars=None, playbook="playbooks/preflight.yml", extra_args=()):
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
            os.environ,
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_STDOUT_CALLBACK="default",
            # Throw-away inventories reuse host names (node-a, ...): no facts from another test's run.
            ANSIBLE_CACHE_PLUGIN="memory",
        )
        proc = subprocess.run(
            [ANSIBLE_PLAYBOOK, "-i", str(inv), str(ROOT / playbook), *extra_args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=PLAYBOOK_TIMEOUT,
            check=False,
        )
        return proc.returncode, proc.stdout + proc.stderr

    return run


def local_hosts(head=("node-a",), workers=("node-b",), **hostvars):
    """An inventory of hosts on this machine, each with its own loopback address as ray_node_ip."""
    names = list(dict.fromkeys(list(head) + list(workers)))

    def host(name):
        return {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "ray_node_ip": str(ipaddress.ip_address("127.0.0.1") + names.index(name)),
            **hostvars.get(name, {}),
        }

    groups = {"ray_workers": {"hosts": {w: host(w) for w in workers}}}
    if head:
        groups["ray_head"] = {"hosts": {h: host(h) for h in head}}
    return {"all": {"children": groups}}
