"""Old venvs on a converged node: an install keeps the current and the previous one, removes older ones,
and never one a running process uses. Restores nothing it did not add (the fleet's venvs stay)."""

import re
import subprocess

from sandbox import SETTINGS, playbook

HOST = "ray-worker-2"
# Each run installs (and prunes) on that host only: the other hosts' venvs are not what this stage tests.
ON_HOST = ("--limit", HOST)
ROOT_DIR = SETTINGS["ray_install_root"]
CURRENT = f"{ROOT_DIR}/{SETTINGS['ray_version']}"


def sh(command):
    return subprocess.check_output(["docker", "exec", HOST, "sh", "-c", command], text=True)


def fake_venv(version, installed_at):
    """A venv-shaped directory whose install completed at the given time (the marker's mtime)."""
    path = f"{ROOT_DIR}/{version}"
    marker = f"{path}/.rayvllm-requirements"
    sh(f"mkdir -p {path}/bin && echo 'home = /usr/bin' >{path}/pyvenv.cfg && echo 'ray=={version}' >{marker}"
       f" && touch -d '{installed_at}' {marker}")  # fmt: skip
    return path


def venvs():
    return set(sh(f"find {ROOT_DIR} -mindepth 1 -maxdepth 1 -type d").split())


def test_an_install_prunes_old_venvs_but_not_the_previous_or_one_in_use():
    oldest = fake_venv("2.40.0", "2020-01-01")
    in_use = fake_venv("2.41.0", "2020-01-02")
    old = fake_venv("2.42.0", "2020-01-03")
    previous = fake_venv("2.43.0", "2020-01-04")
    # A process running from an old venv (as a Ray node not yet restarted would be).
    sh(f"printf 'import time\\ntime.sleep(600)\\n' >{in_use}/bin/hold.py")
    subprocess.check_call(["docker", "exec", "-d", HOST, "python3", f"{in_use}/bin/hold.py"])
    try:
        rc, out = playbook("playbooks/ray.yml", "--tags", "ray_install", *ON_HOST)
        assert rc == 0, out[-3000:]
        assert venvs() == {CURRENT, previous, in_use}
        assert re.search(rf"{HOST}\s*: ok=\d+\s+changed=1 ", out), out[-3000:]

        # Nothing more to remove: the second run changes nothing.
        rc, out = playbook("playbooks/ray.yml", "--tags", "ray_install", *ON_HOST)
        assert rc == 0 and re.search(rf"{HOST}\s*: ok=\d+\s+changed=0 ", out), out[-3000:]

        # Once nothing uses it, the old venv goes; ray_venvs_keep=1 keeps one more than the previous.
        sh("pkill -f [b]in/hold.py")
        rc, out = playbook("playbooks/ray.yml", "--tags", "ray_install", "-e", "ray_venvs_keep=1", *ON_HOST)
        assert rc == 0, out[-3000:]
        assert venvs() == {CURRENT, previous, in_use}
        rc, out = playbook("playbooks/ray.yml", "--tags", "ray_install", *ON_HOST)
        assert rc == 0, out[-3000:]
        assert venvs() == {CURRENT, previous}
    finally:
        sh(f"pkill -f [b]in/hold.py; rm -rf {oldest} {in_use} {old} {previous}")
