"""Helpers of the small molecule scenarios (gpu_preflight, firewall_ufw, firewall_firewalld): their hosts, the
repository's playbooks run from the controller against the scenario's own inventory (MOLECULE_INVENTORY_FILE),
and the firewall scenarios' probes (a TCP connection from the controller, a worker reached over real SSH)."""

import json
import os
import socket
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
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def firewall(*extra, inventory=None):
    """ansible-playbook playbooks/firewall.yml on the scenario's hosts: (exit status, output)."""
    return playbook("playbooks/firewall.yml", *extra, inventory=inventory)


def reaches(address, port, timeout=3):
    """Whether the controller (the Docker host, a member of no cluster) opens a TCP connection to ADDRESS:PORT."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def over_ssh(tmp_path, head, worker, address):
    """An inventory of the firewall scenarios' cluster in which WORKER (at ADDRESS, running sshd) is reached
    over real SSH, as Ansible reaches real hosts, and HEAD with docker exec: (inventory path, a function that
    tells whether a new SSH connection from the controller to WORKER gets in)."""
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    host_of(worker).run_expect(
        [0],
        "install -d -m 700 /root/.ssh && echo '%s' > /root/.ssh/authorized_keys"
        % key.with_suffix(".pub").read_text().strip(),
    )
    ssh_args = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5"
    over = {
        "ansible_connection": "ssh",
        "ansible_host": address,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": ssh_args,
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "vars": {"ray_version": "2.60.0", "vllm_version": "0.32.0"},
                    "children": {
                        "ray_head": {"hosts": {head: {"ansible_connection": "community.docker.docker"}}},
                        "ray_workers": {"hosts": {worker: over}},
                    },
                }
            }
        )
    )

    def ssh_works():
        command = ["ssh", *ssh_args.split(), "-i", str(key), "root@" + address, "true"]
        return subprocess.run(command, capture_output=True, timeout=30, check=False).returncode == 0

    return inventory, ssh_works


def no_nftables_of_ours(host):
    """Whether nothing of the role's nftables path (table, rule file, unit) is on HOST: the firewall the host
    already runs stays the only one."""
    return (
        "rayvllm_fleet" not in host.run("nft list tables 2>/dev/null").stdout
        and not host.file("/etc/rayvllm/firewall.nft").exists
        and not host.file("/etc/systemd/system/rayvllm-firewall.service").exists
    )


def reachability(member, address):
    """What the firewall scenarios' listeners on the worker at ADDRESS answer: (the cluster member MEMBER reaches
    7777, which only members may; the controller reaches the operator's 5555; the controller reaches 7777)."""
    by_member = host_of(member).run("curl -sS -m 5 -o /dev/null http://%s:7777/" % address).rc == 0
    return by_member, reaches(address, 5555), reaches(address, 7777)
