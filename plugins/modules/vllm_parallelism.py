#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_parallelism
short_description: Plan and validate vLLM tensor and pipeline parallel sizes for a Ray cluster
version_added: "0.2.0"
description:
  - Reads a model's C(config.json) and the GPUs of each Ray node, and returns tensor and pipeline parallel sizes
    that vLLM's Ray executor can place, or fails in seconds with the rule that was broken and a size that works
    (a wrong size otherwise hangs in Ray's placement-group wait for up to 30 minutes).
  - "Rules: the tensor parallel size (TP) divides C(num_attention_heads); the KV heads divide TP or TP divides the
    KV heads; the pipeline parallel size (PP) is at most C(num_hidden_layers); TP x PP is at most the cluster's
    GPUs; TP is at most the GPUs of one node unless O(allow_cross_node_tp)."
  - "Auto (size V(0)): TP is the largest valid size that fits one node, PP the number of nodes that hold a TP
    group, at most the layer count."
  - "Standard library only; runs where C(config.json) is: on the Ray head, or on the controller
    (C(delegate_to: localhost)) for a copy there. Never reports a change."
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  model_config_path:
    description: Path to the model's Hugging Face C(config.json) (multimodal configs are read from C(text_config)).
    type: str
    required: true
  gpus_per_node:
    description: GPUs of each Ray node, one entry per node (for example from M(rayvllm.fleet.ray_cluster_wait)).
    type: list
    elements: int
    required: true
  tensor_parallel_size:
    description: Tensor parallel size; V(0) chooses one.
    type: int
    default: 0
  pipeline_parallel_size:
    description: Pipeline parallel size; V(0) chooses one.
    type: int
    default: 0
  allow_cross_node_tp:
    description: Allow a tensor parallel group to span nodes (only sensible with a fast interconnect between them).
    type: bool
    default: false
  running_unit:
    description:
      - The systemd unit of the vLLM server that runs now; its sizes are returned in RV(running) and compared with the
        plan in RV(plan_changed). Unset, or a file that does not exist (nothing served yet), compares nothing.
    type: path
attributes:
  check_mode:
    description: Only reads; returns the same plan in check mode.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: Plan the parallel sizes for three 8-GPU nodes
  rayvllm.fleet.vllm_parallelism:
    model_config_path: /srv/models/llama-3.1-70b/config.json
    gpus_per_node: [8, 8, 8]
  delegate_to: localhost
  register: parallel
# -> tensor_parallel_size 8, pipeline_parallel_size 3, world_size 24
"""

RETURN = r"""
tensor_parallel_size:
  description: Tensor parallel size to pass to vLLM.
  returned: success
  type: int
  sample: 8
pipeline_parallel_size:
  description: Pipeline parallel size to pass to vLLM.
  returned: success
  type: int
  sample: 3
world_size:
  description: GPUs the plan uses (TP x PP), each one Ray placement bundle.
  returned: success
  type: int
  sample: 24
running:
  description: The sizes O(running_unit) passes to vLLM now; null without one.
  returned: success
  type: dict
  sample: {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
plan_changed:
  description: Whether the plan differs from RV(running) (false without a running unit).
  returned: success
  type: bool
  sample: false
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.vllm_parallelism import (
    PlanError,
    plan,
    running_sizes,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_config_path=dict(type="str", required=True),
            gpus_per_node=dict(type="list", elements="int", required=True),
            tensor_parallel_size=dict(type="int", default=0),
            pipeline_parallel_size=dict(type="int", default=0),
            allow_cross_node_tp=dict(type="bool", default=False),
            running_unit=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        with open(p["model_config_path"]) as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot read the model config %s: %s" % (p["model_config_path"], exc))
    try:
        result = plan(
            config,
            p["gpus_per_node"],
            tensor_parallel_size=p["tensor_parallel_size"],
            pipeline_parallel_size=p["pipeline_parallel_size"],
            allow_cross_node_tp=p["allow_cross_node_tp"],
        )
    except PlanError as exc:
        module.fail_json(msg=str(exc), changed=False)
    running = None
    if p["running_unit"]:
        try:
            with open(p["running_unit"]) as handle:
                running = running_sizes(handle.read())
        except FileNotFoundError:
            running = None
        except OSError as exc:
            module.fail_json(msg="cannot read the running unit %s: %s" % (p["running_unit"], exc))
    changed_plan = running is not None and any(running[key] != result[key] for key in running)
    module.exit_json(changed=False, running=running, plan_changed=changed_plan, **result)


if __name__ == "__main__":
    main()
