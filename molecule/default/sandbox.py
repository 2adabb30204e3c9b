"""Helpers shared by the sandbox verify tests and the stages that change the fleet (molecule/default/stages):
the Ray state API, Prometheus' API, running the repository's playbooks, waiting."""

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import testinfra
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))  # ansible_collections.rayvllm.fleet from this checkout
GROUP_VARS = yaml.safe_load((ROOT / "inventories/sandbox/group_vars/all.yml").read_text())
RAY_DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
SETTINGS = {**RAY_DEFAULTS, **GROUP_VARS}
HEAD_IP = "10.77.0.10"
# molecule's inventory during `molecule verify`; the repository's sandbox inventory (same hosts) in the stages.
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE") or str(ROOT / "inventories/sandbox")
NODE_IPS = {"ray-head": "10.77.0.10", "ray-worker-1": "10.77.0.11", "ray-worker-2": "10.77.0.12"}


def alive_nodes():
    url = (
        f"http://{HEAD_IP}:{SETTINGS['ray_dashboard_port']}/api/v0/nodes"
        "?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE&limit=1000"
    )
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)["data"]["result"]["result"]


def environment_file(text):
    """{name: value} of a systemd EnvironmentFile= (KEY="value" lines, quoted and escaped)."""
    return dict(
        shlex.split(line)[0].split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


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
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", INVENTORY,
         str(ROOT / playbook_path), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


PROMETHEUS = f"http://{HEAD_IP}:9090"
RULES = ROOT / "roles/prometheus/files/rules"
GRAFANA_DIR = "/etc/grafana"
DASHBOARD_DIR = "/var/lib/grafana/dashboards/rayvllm"
DATASOURCE_UID = "rayvllm-prometheus"
VLLM_URL = f"http://{HEAD_IP}:{SETTINGS.get('vllm_port', 8000)}"


def head():
    return testinfra.get_host("docker://ray-head")


def api(path, **params):
    url = f"{PROMETHEUS}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as err:  # a query that does not parse is HTTP 400 with the reason
        raise AssertionError(f"{path} {params}: HTTP {err.code} {err.read().decode()[:300]}") from None
    assert body["status"] == "success", body
    return body["data"]


def targets_by_job():
    by_job = {}
    for t in api("targets")["activeTargets"]:
        by_job.setdefault(t["labels"]["job"], []).append(t)
    return by_job


def all_up(jobs=("ray", "vllm", "node")):
    by_job = targets_by_job()
    ok = all(by_job.get(job) and all(t["health"] == "up" for t in by_job[job]) for job in jobs)
    return by_job if ok else None


def prometheus_pid():
    return head().check_output("systemctl show -p MainPID --value prometheus")


def prometheus_binary():
    """The program the running Prometheus was started as (/proc/PID/exe needs ptrace rights the host lacks)."""
    return head().check_output(f"tr '\\0' '\\n' < /proc/{prometheus_pid()}/cmdline | head -n1")
