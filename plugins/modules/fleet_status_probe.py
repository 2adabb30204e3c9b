#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_status_probe
short_description: Read what runs on a Ray cluster, a vLLM server, a vllm-router or an Alertmanager
version_added: "0.3.0"
description:
  - Only reads; every part is optional and read only when its option is set.
  - With O(dashboard_url), the ALIVE nodes of a Ray cluster (C(GET /api/v0/nodes)) with their GPUs, and the
    cluster's Ray version (C(GET /api/v0/cluster_metadata)), with the Ray token read from O(ray_token_file) on the
    host the module runs on.
  - With O(vllm_url), the vLLM version (C(GET /version)) and one greedy completion of O(max_tokens) tokens for
    O(model) with its latency, with the API key read from O(vllm_api_key_files) on the host (the key never leaves it
    and is never returned).
  - With O(router_urls), each vllm-router's rotation (C(GET /list_workers)).
  - With O(alertmanager_url), the firing alerts (active, neither silenced nor inhibited; C(GET /api/v2/alerts)).
  - A part that cannot be read does not fail the module; its C(error) says why. The playbook
    C(rayvllm.fleet.status) compares the result with the inventory (filter C(rayvllm.fleet.fleet_status)).
  - Never reports a change, and makes the same requests in check mode.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  dashboard_url:
    description: The Ray dashboard of a cluster's head, for example V(http://10.0.0.1:8265). Empty reads no Ray state.
    type: str
    default: ""
  ray_token_file:
    description: File on the host holding the cluster's Ray token (C(RAY_AUTH_TOKEN_PATH)); empty sends none.
    type: path
    default: ""
  vllm_url:
    description: Base URL of the cluster's vLLM server. Empty reads no vLLM state.
    type: str
    default: ""
  vllm_api_key_files:
    description:
      - Files on the host that may hold the API key, the first one that exists is read - vLLM's environment file
        (its C(VLLM_API_KEY) line) or a file holding only the key (Ray Serve's). None sends no key.
    type: list
    elements: path
    default: []
  model:
    description: The model name the completion asks for (required with O(vllm_url)).
    type: str
    default: ""
  more_models:
    description:
      - More models the same server serves (a C(ray_serve) cluster's others), one completion each; their results in the
        C(more) key of RV(vllm).
    type: list
    elements: str
    default: []
  prompt:
    description: Prompt of the completion.
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens the completion asks for.
    type: int
    default: 4
  completion_timeout:
    description: Seconds the completion may take.
    type: float
    default: 60
  router_urls:
    description: Base URLs of vllm-router instances whose rotation to read.
    type: list
    elements: str
    default: []
  alertmanager_url:
    description: Base URL of an Alertmanager whose firing alerts to read. Empty reads none.
    type: str
    default: ""
  timeout:
    description: Seconds each read (not the completion) may take.
    type: float
    default: 10
attributes:
  check_mode:
    description: Makes the same read-only requests as in a normal run.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: What cluster default runs
  rayvllm.fleet.fleet_status_probe:
    dashboard_url: http://10.0.0.1:8265
    ray_token_file: /etc/ray/auth_token
    vllm_url: http://10.0.0.1:8000
    vllm_api_key_files: [/etc/vllm/vllm.env]
    model: tiny-llama
  register: status
"""

RETURN = r"""
ray:
  description: C(url), C(nodes) (C(ip), C(node_id), C(is_head), C(gpus), C(cpus) per ALIVE node; null when unread),
    C(version) and C(error).
  returned: when O(dashboard_url) is set
  type: dict
vllm:
  description: C(url), C(model), C(version), C(version_error), C(completion) (C(tokens), C(seconds); null when it
    failed), C(error), and C(more) (per O(more_models) entry, its C(completion) and C(error)).
  returned: when O(vllm_url) is set
  type: dict
routers:
  description: One C(url), C(rotation) (backend URLs; null when unread) and C(error) per O(router_urls) entry.
  returned: always
  type: list
  elements: dict
alertmanager:
  description: C(url), C(alerts) (C(name), C(severity), C(labels), C(since), C(summary); null when unread) and
    C(error).
  returned: when O(alertmanager_url) is set
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.fleet_status import (
    probe_alertmanager,
    probe_ray,
    probe_router,
    probe_vllm,
    read_api_key,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dashboard_url=dict(type="str", default=""),
            ray_token_file=dict(type="path", default=""),
            vllm_url=dict(type="str", default=""),
            vllm_api_key_files=dict(type="list", elements="path", default=[], no_log=False),
            model=dict(type="str", default=""),
            more_models=dict(type="list", elements="str", default=[]),
            prompt=dict(type="str", default="The capital of France is"),
            max_tokens=dict(type="int", default=4, no_log=False),
            completion_timeout=dict(type="float", default=60),
            router_urls=dict(type="list", elements="str", default=[]),
            alertmanager_url=dict(type="str", default=""),
            timeout=dict(type="float", default=10),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["vllm_url"] and not p["model"]:
        module.fail_json(msg="model is required with vllm_url: the completion asks for it")
    result = {"changed": False, "routers": []}
    if p["dashboard_url"]:
        result["ray"] = probe_ray(p["dashboard_url"], p["ray_token_file"], p["timeout"])
    if p["vllm_url"]:
        api_key = ""
        for path in p["vllm_api_key_files"]:
            if os.path.exists(path):
                try:
                    with open(path) as handle:
                        api_key = read_api_key(handle.read())
                except OSError:
                    continue
                break
        result["vllm"] = probe_vllm(
            p["vllm_url"], api_key, p["model"], p["prompt"], p["max_tokens"], p["completion_timeout"]
        )
        result["vllm"]["more"] = {}
        for name in p["more_models"]:
            more = probe_vllm(p["vllm_url"], api_key, name, p["prompt"], p["max_tokens"], p["completion_timeout"])
            result["vllm"]["more"][name] = {"completion": more["completion"], "error": more["error"]}
    result["routers"] = [probe_router(url, p["timeout"]) for url in p["router_urls"]]
    if p["alertmanager_url"]:
        result["alertmanager"] = probe_alertmanager(p["alertmanager_url"], p["timeout"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
