#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_facts
short_description: Gather the facts the fleet's roles read, and the installed packages, in one call
version_added: "0.3.0"
description:
  - Returns as Ansible facts what C(ansible.builtin.setup) with C(gather_subset=[!all, min, network]) returns of
    the OS (C(distribution*), C(os_family)), the architecture and host names, the environment of the user the
    module runs as (C(env)) and the network (C(interfaces), each interface's addresses, C(default_ipv4)); the rest
    of setup's C(min) subset, which no role of the collection reads, is not gathered.
  - On Debian and Ubuntu hosts with iproute2's JSON output, these are read directly (C(/etc/os-release), two C(ip -j)
    calls), with setup's names and values but for two differences - an address with a label (C(eth0:1)) is one of its
    device's C(ipv4_secondaries), not an interface of its own, and C(fqdn), C(domain), C(default_ipv6), the user space's
    architecture and the interfaces' hardware details are not read. Elsewhere Ansible's own collectors run.
  - With O(accounts), also the local users and groups, for the roles to skip their C(user) and C(group) calls when
    the accounts are already as they would make them (filter C(rayvllm.fleet.account_in_place)).
  - With O(packages), also the names of the installed packages, read from dpkg's status database (no
    C(dpkg-query), no apt cache).
  - With O(units), also the services and timers that are active and enabled at boot (one C(systemctl show)), for
    the roles to skip their C(systemd_service) calls for units that already run and start at boot and that no task
    of the run stops (a restart leaves a unit running).
  - With O(probe), also what preflight checks on the host (M(rayvllm.fleet.host_probe)'s reads, every listening
    TCP socket among them) in the same call. C(playbooks/preflight.yml) asks for it, and saves a module call per
    host.
  - The C(fleet_facts) role runs it once per host and run, as the login user (its environment is the SSH
    connection's).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  packages:
    description: Also return the installed packages.
    type: bool
    default: true
  accounts:
    description: Also return the local users and groups (C(/etc/passwd), C(/etc/group)).
    type: bool
    default: true
  units:
    description: Also return the services and timers that are active and enabled at boot.
    type: bool
    default: true
  gather_timeout:
    description: Seconds each fact collector may take.
    type: int
    default: 10
  probe:
    description:
      - Also read what M(rayvllm.fleet.host_probe) reads (returned as RV(probe)), with every listening TCP socket
        rather than chosen ports.
    type: dict
    suboptions:
      python:
        description: Interpreter whose Python X.Y.Z to read; unset reads none.
        type: str
      paths:
        description: Paths to describe (exists, link, directory, holds C(config.json), where it resolves to).
        type: list
        elements: str
        default: []
      node_ip:
        description:
          - The node's address (C(ray_node_ip)); where firewalld runs, the zone of the interface that holds it is read
            besides the default route's.
        type: str
        default: ""
      node_interface:
        description:
          - The node's interface (C(ray_node_interface)), when the inventory names it; wins over O(probe.node_ip).
        type: str
        default: ""
attributes:
  check_mode:
    description: Reads the same in check mode.
    support: full
  diff_mode:
    description: Nothing to show.
    support: none
  facts:
    description: Returns the facts as C(ansible_facts).
    support: full
"""

EXAMPLES = r"""
- name: The facts and packages the roles read
  rayvllm.fleet.host_facts:
  become: false
  register: host

- name: Only the facts, of a host outside the play
  rayvllm.fleet.host_facts:
    packages: false
    accounts: false
  delegate_to: worker-7
  delegate_facts: true
"""

RETURN = r"""
ansible_facts:
  description: The facts, named as C(ansible.builtin.setup) names them.
  returned: always
  type: dict
  sample: {"default_ipv4": {"address": "10.0.0.5", "interface": "eth0"}, "distribution": "Debian"}
packages:
  description: The names of the installed packages (dpkg status C(install ok installed)), sorted; empty without
    O(packages) or on a host without dpkg.
  returned: always
  type: list
  elements: str
  sample: ["ca-certificates", "python3"]
accounts:
  description:
    - The local users (C(uid), C(gid), C(home), C(shell), C(home_exists)) and groups (C(gid), C(members)); empty
      without O(accounts).
  returned: always
  type: dict
  sample:
    users: {"ray": {"uid": 999, "gid": 999, "home": "/var/lib/ray", "shell": "/usr/sbin/nologin", "home_exists": true}}
    groups: {"ray": {"gid": 999, "members": ["prometheus"]}}
running_units:
  description:
    - The loaded services and timers that are active (C(ActiveState)) and enabled at boot (C(UnitFileState)), by their
      full names, sorted; empty without O(units) or on a host without systemd.
  returned: always
  type: list
  elements: str
  sample: ["prometheus-node-exporter.service", "vllm-watchdog.timer"]
probe:
  description:
    - With O(probe), what M(rayvllm.fleet.host_probe) returns (C(python), C(shm_mib), C(memory_mib), C(listening)
      with every listening TCP socket, C(firewalls), C(firewalld_zones), C(paths)).
  returned: when O(probe) is given
  type: dict
  sample: {"python": {"version": "3.11.2"}, "shm_mib": 8192, "memory_mib": 257000, "listening": [], "firewalls": []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_facts import (
    collect_facts,
    node_interface,
    read_accounts,
    read_packages,
    read_running_units,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_probe import probe as host_probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="bool", default=True),
            accounts=dict(type="bool", default=True),
            units=dict(type="bool", default=True),
            gather_timeout=dict(type="int", default=10),
            probe=dict(
                type="dict",
                options=dict(
                    python=dict(type="str"),
                    paths=dict(type="list", elements="str", default=[]),
                    node_ip=dict(type="str", default=""),
                    node_interface=dict(type="str", default=""),
                ),
            ),
        ),
        supports_check_mode=True,
    )
    facts = collect_facts(module, timeout=module.params["gather_timeout"])
    packages = read_packages() if module.params["packages"] else []
    accounts = read_accounts() if module.params["accounts"] else {"users": {}, "groups": {}}
    units = read_running_units(module) if module.params["units"] else []
    result = dict(changed=False, ansible_facts=facts, packages=packages, accounts=accounts, running_units=units)
    wanted = module.params["probe"]
    if wanted is not None:
        interface = node_interface(facts, wanted["node_ip"], wanted["node_interface"])
        result["probe"] = host_probe(
            python=wanted["python"], ports=None, firewall_interfaces=[interface] if interface else [],
            paths=wanted["paths"],
        )  # fmt: skip
    module.exit_json(**result)


if __name__ == "__main__":
    main()
