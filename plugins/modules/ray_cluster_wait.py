#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_cluster_wait
short_description: Wait until a Ray cluster has enough live nodes and GPUs
version_added: "0.1.0"
description:
  - Polls the Ray dashboard's state API (C(GET /api/v0/nodes), ALIVE nodes only) until the cluster has at least
    O(min_nodes) live nodes, at least O(min_gpus) GPUs in total, and every address in O(expected_ips) has joined.
  - Uses the Python standard library only; run it on any host that reaches the dashboard (usually the head).
  - Never reports a change. In check mode it waits exactly as in a normal run, since it only reads.
  - An unreachable dashboard is reported as such, not as a cluster with zero nodes.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  dashboard_url:
    description: Base URL of the Ray dashboard, for example V(http://10.0.0.1:8265).
    type: str
    required: true
  min_nodes:
    description: Number of ALIVE nodes (head included) required.
    type: int
    required: true
  min_gpus:
    description: Total number of GPUs (Ray's C(GPU) resource, summed over ALIVE nodes) required.
    type: float
    default: 0
  expected_ips:
    description: Node IP addresses that must be among the ALIVE nodes.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait before failing.
    type: int
    default: 300
  interval:
    description: Seconds between two polls.
    type: float
    default: 2
  token:
    description:
      - "Bearer token for a cluster started with C(RAY_AUTH_MODE=token), sent as C(Authorization: Bearer <token>)."
    type: str
    required: false
  token_file:
    description:
      - Path, on the host the module runs on, of a file holding that token (the cluster's C(RAY_AUTH_TOKEN_PATH)).
        The token then never travels in the task's arguments. Mutually exclusive with O(token).
    type: path
    required: false
attributes:
  check_mode:
    description: Can run in check mode and return the same result (it only reads).
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
notes:
  - The state API answers on the dashboard port (default 8265); the dashboard must listen on an address the
    module's host can reach.
"""

EXAMPLES = r"""
- name: Wait for the head and two workers with 2 GPUs each
  rayvllm.fleet.ray_cluster_wait:
    dashboard_url: "http://10.0.0.1:8265"
    min_nodes: 3
    min_gpus: 6
    expected_ips: [10.0.0.1, 10.0.0.2, 10.0.0.3]
    timeout: 600
  register: cluster

- name: Show what joined
  ansible.builtin.debug:
    msg: "{{ cluster.alive_nodes }} nodes, {{ cluster.total_gpus }} GPUs"
"""

RETURN = r"""
alive_nodes:
  description: Number of ALIVE nodes at the last successful poll.
  returned: always
  type: int
  sample: 3
total_gpus:
  description: Sum of the C(GPU) resource over ALIVE nodes (nodes without GPUs count 0).
  returned: always
  type: float
  sample: 6.0
nodes:
  description: The ALIVE nodes, head first.
  returned: always
  type: list
  elements: dict
  contains:
    ip:
      description: Node IP address as Ray reports it.
      type: str
    node_id:
      description: Ray node ID.
      type: str
    is_head:
      description: Whether this is the head node.
      type: bool
    gpus:
      description: GPUs this node offers to Ray.
      type: float
    cpus:
      description: CPUs this node offers to Ray.
      type: float
  sample: [{"ip": "10.0.0.1", "node_id": "8f1c...", "is_head": true, "gpus": 2.0, "cpus": 8.0}]
missing_ips:
  description: Addresses from O(expected_ips) that are not ALIVE.
  returned: always
  type: list
  elements: str
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import (
    fetch_nodes,
    read_token_file,
    shortfall_message,
    wait_for_cluster,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dashboard_url=dict(type="str", required=True),
            min_nodes=dict(type="int", required=True),
            min_gpus=dict(type="float", default=0),
            expected_ips=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=300),
            interval=dict(type="float", default=2),
            token=dict(type="str", no_log=True),
            token_file=dict(type="path"),
        ),
        mutually_exclusive=[("token", "token_file")],
        supports_check_mode=True,
    )
    p = module.params
    if p["min_nodes"] < 1:
        module.fail_json(msg="min_nodes must be at least 1 (the head); got %d" % p["min_nodes"])
    if p["timeout"] < 0 or p["interval"] <= 0:
        module.fail_json(msg="timeout must be >= 0 and interval > 0")

    token = p["token"]
    if p["token_file"]:
        try:
            token = read_token_file(p["token_file"])
        except ValueError as exc:
            module.fail_json(msg=str(exc))

    def fetch():
        return fetch_nodes(p["dashboard_url"], token=token, timeout=min(10.0, max(1.0, p["interval"] * 5)))

    ok, summary, error = wait_for_cluster(
        fetch,
        min_nodes=p["min_nodes"],
        min_gpus=p["min_gpus"],
        expected_ips=p["expected_ips"],
        timeout=p["timeout"],
        interval=p["interval"],
    )
    result = dict(changed=False, alive_nodes=0, total_gpus=0.0, nodes=[], missing_ips=list(p["expected_ips"]))
    if summary is not None:
        result.update((k, summary[k]) for k in ("alive_nodes", "total_gpus", "nodes", "missing_ips"))
    if ok:
        module.exit_json(**result)
    if error is not None:
        seen = (
            ""
            if summary is None
            else " (last successful reading: %d nodes, %s GPUs)" % (summary["alive_nodes"], summary["total_gpus"])
        )
        module.fail_json(
            msg="Ray dashboard unreachable after %ss: %s%s. Is ray-head.service running and the dashboard "
            "listening on that address?" % (p["timeout"], error, seen),
            **result,
        )
    module.fail_json(
        msg=shortfall_message(summary, p["min_nodes"], p["min_gpus"], p["timeout"], p["dashboard_url"]), **result
    )


if __name__ == "__main__":
    main()
