"""Inventories for the fleet model's tests: a host's variables and the network facts Ansible would gather."""

import yaml
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm

DEFAULTS = fm.literal_defaults(
    {role: yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text()) for role in fm.SHARED_SETTINGS}
)
PINNED = {"ray_version": "2.60.0", "vllm_version": "0.32.0"}


def facts(ip, interface="eth0", *secondaries):
    return {
        "default_ipv4": {"address": ip, "interface": interface},
        "interfaces": ["lo", interface],
        "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}},
        interface.replace("-", "_"): {
            "device": interface,
            "ipv4": {"address": ip},
            "ipv4_secondaries": [{"address": a} for a in secondaries],
        },
    }


def host(ip, cluster=None, interface="eth0", **variables):
    hvars = {**PINNED, **variables}
    if cluster is not None:
        hvars["ray_cluster_name"] = cluster
    return {"vars": hvars, "facts": facts(ip, interface)}


def build(heads, workers, hosts, monitoring=(), routers=()):
    return fm.build(heads, workers, hosts, DEFAULTS, list(monitoring), list(routers))
