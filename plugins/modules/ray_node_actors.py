#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_node_actors
short_description: What runs on some nodes of a Ray cluster - its live actors, vLLM's ranks among them
version_added: "0.3.0"
description:
  - Reads the Ray dashboard's state API (C(GET /api/v0/nodes), then C(GET /api/v0/actors) of each node asked for)
    and reports, for each address of O(node_ips), whether Ray lists the node as ALIVE, its live actors by class and
    how many of them are vLLM's ranks (C(RayWorkerWrapper) or C(RayWorkerProc), the actors of vLLM's Ray
    executors).
  - C(playbooks/remove_node.yml) asks it whether a leaving node holds ranks of its cluster's vLLM, which must then
    restart on the GPUs that stay.
  - Uses the Python standard library only; run it on a host that reaches the dashboard (the cluster's head).
  - Never reports a change; check mode reads the same.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  dashboard_url:
    description: Base URL of the Ray dashboard, for example V(http://10.0.0.1:8265).
    type: str
    required: true
  node_ips:
    description: Addresses of the nodes to report on (the address each node has in Ray, C(ray_node_ip)).
    type: list
    elements: str
    required: true
  token_file:
    description:
      - Path, on the host the module runs on, of the file holding the cluster's token (its C(RAY_AUTH_TOKEN_PATH));
        omit it for a cluster without token authentication. The token never travels in the task's arguments.
    type: path
    required: false
  timeout:
    description: Seconds each request may take.
    type: float
    default: 10
attributes:
  check_mode:
    description: Can run in check mode and return the same result (it only reads).
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: Whether gpu-17 holds ranks of vLLM
  rayvllm.fleet.ray_node_actors:
    dashboard_url: "http://10.0.0.1:8265"
    node_ips: [10.0.0.17]
    token_file: /etc/ray/token
  register: work
"""

RETURN = r"""
nodes:
  description: By address, what Ray runs there.
  returned: always
  type: dict
  contains:
    alive:
      description: Whether Ray lists the node as ALIVE (a stopped node or a dead server is not).
      type: bool
    node_id:
      description: Ray's node ID; empty when not ALIVE.
      type: str
    actors:
      description: Live actors on the node, by class name.
      type: dict
    vllm_ranks:
      description: How many of them are vLLM's ranks.
      type: int
  sample: {"10.0.0.17": {"alive": true, "node_id": "8f1c...", "actors": {"RayWorkerWrapper": 2}, "vllm_ranks": 2}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import (
    DashboardUnreachable,
    actors_url,
    fetch_json,
    fetch_nodes,
    node_work,
    parse_actors,
    read_token_file,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dashboard_url=dict(type="str", required=True),
            node_ips=dict(type="list", elements="str", required=True),
            token_file=dict(type="path"),
            timeout=dict(type="float", default=10),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        token = read_token_file(p["token_file"]) if p["token_file"] else None
        nodes = fetch_nodes(p["dashboard_url"], token=token, timeout=p["timeout"])
        work = node_work(
            nodes,
            p["node_ips"],
            lambda node_id: parse_actors(fetch_json(actors_url(p["dashboard_url"], node_id), token, p["timeout"])),
        )
    except (ValueError, DashboardUnreachable) as exc:
        module.fail_json(
            msg="Could not read what runs on %s from Ray's dashboard at %s: %s. Is the head's ray-head.service "
            "running?" % (", ".join(p["node_ips"]), p["dashboard_url"], exc),
            nodes={},
        )
    module.exit_json(changed=False, nodes=work)


if __name__ == "__main__":
    main()
