#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_probe
short_description: Read in one call what preflight checks on a host
version_added: "0.3.0"
description:
  - Reads, in one module call, the Python X.Y.Z of O(python), the size of C(/dev/shm), the memory, the TCP sockets
    listening on O(ports) and who holds them, which firewall the host runs (C(ufw status) active, the C(firewalld)
    unit active), the firewalld zone and target of the default route's interface and each of O(firewall_interfaces)
    (only where firewalld runs), and what each of O(paths) is.
  - Changes nothing. The checks themselves run on the controller (C(roles/preflight), C(roles/firewall)), from this
    result and the inventory.
  - Standard library only, on the host's system Python; a socket's process is named only where the module may read
    its C(/proc/<pid>/fd) (run it as root to see them all).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  python:
    description:
      - Interpreter whose version to read (Ray needs the same X.Y.Z on every node of a cluster); unset reads none.
    type: str
  shm:
    description: The shared memory mount whose size to read.
    type: path
    default: /dev/shm
  ports:
    description: TCP ports whose listening sockets to report.
    type: list
    elements: int
    default: []
  firewall_interfaces:
    description: Interfaces whose firewalld zone to read besides the default route's, where firewalld runs.
    type: list
    elements: str
    default: []
  paths:
    description: Paths to describe (exists, link, directory, holds C(config.json), where it resolves to).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Reads the same in check mode.
    support: full
  diff_mode:
    description: Nothing to show.
    support: none
"""

EXAMPLES = r"""
- name: What preflight needs to know about this host
  rayvllm.fleet.host_probe:
    python: /usr/bin/python3
    ports: [6379, 8265, 8000]
    firewall_interfaces: [eth0]
    paths: [/srv/models/llama]
  register: probe
"""

RETURN = r"""
python:
  description: C(version) (X.Y.Z) of O(python), or C(error) when it does not run; empty without O(python).
  returned: always
  type: dict
  sample: {"version": "3.11.2"}
shm_mib:
  description: Size of the O(shm) filesystem in MiB (0 when it does not exist).
  returned: always
  type: int
  sample: 32096
memory_mib:
  description: The host's memory (MemTotal) in MiB.
  returned: always
  type: int
  sample: 515896
listening:
  description:
    - TCP sockets listening on O(ports), each with its port, address, owning user and, where visible, the pid and
      program name.
  returned: always
  type: list
  elements: dict
  sample: [{"port": 8000, "address": "0.0.0.0", "user": "ray", "pid": 4242, "name": "vllm"}]
firewalls:
  description: The firewalls the host runs, C(ufw) and/or C(firewalld).
  returned: always
  type: list
  elements: str
  sample: ["ufw"]
firewalld_zones:
  description:
    - Where firewalld runs, for the default route's interface and each of O(firewall_interfaces), its zone and the
      zone's target.
  returned: always
  type: list
  elements: dict
  sample: [{"interface": "eth0", "zone": "public", "target": "default"}]
paths:
  description:
    - For each of O(paths), C(exists), C(link), C(dir), C(config) (a directory holding config.json) and C(real).
  returned: always
  type: dict
  sample:
    /srv/models/llama:
      {"exists": true, "link": true, "dir": true, "config": true, "real": "/srv/models/llama.revisions/1"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_probe import probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="str"),
            shm=dict(type="path", default="/dev/shm"),
            ports=dict(type="list", elements="int", default=[]),
            firewall_interfaces=dict(type="list", elements="str", default=[]),
            paths=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = probe(
        python=p["python"],
        shm=p["shm"],
        ports=p["ports"],
        firewall_interfaces=p["firewall_interfaces"],
        paths=p["paths"],
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
