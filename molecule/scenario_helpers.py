"""Helpers of the small molecule scenarios (gpu_preflight, firewall_ufw): their hosts, and the repository's
playbooks run from the controller against the scenario's own inventory (MOLECULE_INVENTORY_FILE)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def host_of(name):
    """A testinfra host of the scenario (its containers are reached with docker exec)."""
    import testinfra

    return testinfra.get_host("docker://" + name)


def playbook(path, *extra, inventory=None):
    """ansible-playbook PATH (relative to the repository) on the scenario's hosts (or those of another
    inventory): (exit status, output)."""
    inventory = inventory or os.environ["MOLECULE_INVENTORY_FILE"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory),
         str(ROOT / path), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr
