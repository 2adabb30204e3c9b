# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What roles/fleet_facts reads on every host once per run, in one module call (rayvllm.fleet.host_facts): a few of
Ansible's own fact collectors, and the names of the installed packages from dpkg's database (read as a file: no
dpkg-query, no shell, no apt cache)."""

from __future__ import annotations

# The fact collectors run: the OS (distribution), the architecture and host names (platform), the login user's
# environment (env: the firewall keeps Ansible's own SSH connection open from SSH_CONNECTION) and the network
# (interfaces and their addresses, the default route). Nothing else of setup's "min" subset is read by a role.
FACT_SUBSETS = ("distribution", "platform", "env", "network")

DPKG_STATUS = "/var/lib/dpkg/status"


def installed_packages(text):
    """The sorted, unique names of the packages dpkg's status database (its text) lists as installed and not broken:
    Status "install ok installed", what `dpkg-query -W -f='${db:Status-Abbrev}'` shows as "ii"."""
    names = set()
    package = status = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if package and status == ["install", "ok", "installed"]:
                names.add(package)
            package = status = None
        elif line.startswith("Package:"):
            package = line.split(":", 1)[1].strip()
        elif line.startswith("Status:"):
            status = line.split(":", 1)[1].split()
    return sorted(names)


def read_packages(path=DPKG_STATUS):
    """installed_packages() of the file at path; [] where there is none (a host without dpkg, which preflight refuses
    by its OS)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return installed_packages(f.read())
    except FileNotFoundError:
        return []


def collect_facts(module, timeout=10):
    """Ansible's facts of FACT_SUBSETS (the keys setup returns, with their ansible_ prefix). Only these collectors
    are imported (setup imports every collector of every platform: about 70 ms more per call), so the module's
    payload holds only them; the network facts are Linux's (preflight refuses any other OS)."""
    from ansible.module_utils.facts import ansible_collector
    from ansible.module_utils.facts.namespace import PrefixFactNamespace
    from ansible.module_utils.facts.network.linux import LinuxNetworkCollector
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.env import EnvFactCollector
    from ansible.module_utils.facts.system.platform import PlatformFactCollector

    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=[
            DistributionFactCollector,
            PlatformFactCollector,
            EnvFactCollector,
            LinuxNetworkCollector,
        ],
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec=[],
        gather_subset=["!all", "network"],
        gather_timeout=timeout,
        minimal_gather_subset=frozenset(FACT_SUBSETS) - {"network"},
    )
    return collector.collect(module=module)
