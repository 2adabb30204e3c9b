"""Shared helpers for the sandbox verify tests: the Ray state API, read from the controller."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "collections"))  # ansible_collections.rayvllm.fleet from this checkout
GROUP_VARS = yaml.safe_load((ROOT / "inventories/sandbox/group_vars/all.yml").read_text())
RAY_DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
SETTINGS = {**RAY_DEFAULTS, **GROUP_VARS}
HEAD_IP = "10.77.0.10"
NODE_IPS = {"ray-head": "10.77.0.10", "ray-worker-1": "10.77.0.11", "ray-worker-2": "10.77.0.12"}


def alive_nodes():
    url = (
        f"http://{HEAD_IP}:{SETTINGS['ray_dashboard_port']}/api/v0/nodes"
        "?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE&limit=1000"
    )
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)["data"]["result"]["result"]


def wait_for(predicate, timeout=180, interval=3):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except OSError as exc:  # dashboard restarting
            last = exc
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


def playbook(playbook_path, *extra):
    """Run a playbook of the repo against the sandbox; (return code, stdout + stderr)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", os.environ["MOLECULE_INVENTORY_FILE"],
         str(ROOT / playbook_path), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def settings():
    return SETTINGS
