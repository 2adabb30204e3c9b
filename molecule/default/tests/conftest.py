"""Shared helpers for the sandbox verify tests: the Ray state API, read from the controller."""

import json
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
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


@pytest.fixture(scope="session")
def settings():
    return SETTINGS
