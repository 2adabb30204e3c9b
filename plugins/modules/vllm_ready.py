#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_ready
short_description: Wait until a vLLM OpenAI-compatible server really serves a model
version_added: "0.1.0"
description:
  - Waits in three steps until the vLLM server at O(url) answers a completion for O(model).
  - First C(GET /health) is polled every O(interval) seconds until it answers 200 (a server still loading the
    model refuses connections or answers 503).
  - Then O(model) must be among the ids of C(GET /v1/models). Only no answer or an HTTP 5xx is retried (a few
    times, within O(timeout)); a refused API key or a model the server does not serve fails at once, and the
    message lists the served ids.
  - Then one greedy completion (C(temperature=0)) of O(max_tokens) tokens for O(prompt) must generate at
    least one token. Its timeout is the time left of O(timeout), at least 30 seconds.
  - The API key is a C(no_log) option and is never part of a message or a return value, so unlike an
    M(ansible.builtin.uri) task with an C(Authorization) header, C(ansible-playbook -vvv) does not show it.
  - Uses the Python standard library only; run it on any host that reaches the server.
  - Never reports a change. In check mode it makes the same requests as in a normal run, since they only read
    (the completion generates O(max_tokens) tokens but changes nothing).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  url:
    description:
      - Base URL of the server, for example V(http://10.0.0.1:8000). A trailing C(/v1) is ignored.
    type: str
    required: true
  api_key:
    description:
      - "API key the server was started with (vLLM's C(--api-key)), sent as C(Authorization: Bearer <key>)."
      - Empty sends no C(Authorization) header.
    type: str
    default: ""
  model:
    description:
      - Model id that must be served, as C(/v1/models) lists it (vLLM's C(--served-model-name), else the
        model path).
    type: str
    required: true
  prompt:
    description: Prompt of the test completion.
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens the test completion asks for (at least 1).
    type: int
    default: 4
  timeout:
    description: Seconds to wait in all before failing (the completion may take up to 30 seconds more).
    type: int
    default: 900
  interval:
    description: Seconds between two polls of C(/health) (and two tries of C(/v1/models)).
    type: float
    default: 5
  service:
    description:
      - Systemd service on the host this module runs on that runs the server (for example V(vllm)). While
        C(/health) does not answer, the module checks it. When its process exited (systemd restarted it, or it is
        failed or stopped) the module fails at once, with the exit status, instead of waiting out O(timeout).
      - Empty waits the whole O(timeout) (the server runs elsewhere).
    type: str
    default: ""
attributes:
  check_mode:
    description: Can run in check mode and makes the same read-only requests as in a normal run.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
notes:
  - The failure message names the step that failed (health never 200, server exited, model missing, model check
    failed, completion failed) and the last HTTP status seen (0 for no answer).
"""

EXAMPLES = r"""
- name: Wait until vLLM serves the model (the key stays out of -vvv output)
  rayvllm.fleet.vllm_ready:
    url: "http://10.0.0.1:8000"
    api_key: "{{ vllm_api_key }}"
    model: Qwen/Qwen2.5-7B-Instruct
    timeout: 1200
  register: vllm

- name: Show how long it took
  ansible.builtin.debug:
    msg: "healthy after {{ vllm.health_wait_s }}s, {{ vllm.completion_tokens }} tokens in {{ vllm.completion_s }}s"

- name: Server without an API key, longer test completion
  rayvllm.fleet.vllm_ready:
    url: "http://127.0.0.1:8000/v1"
    model: served-name
    prompt: "Once upon a time"
    max_tokens: 16
"""

RETURN = r"""
health_wait_s:
  description: Seconds until C(GET /health) answered 200.
  returned: success
  type: float
  sample: 182.4
completion_tokens:
  description: Tokens the test completion generated (C(usage.completion_tokens)).
  returned: success
  type: int
  sample: 4
completion_s:
  description: Seconds the test completion took.
  returned: success
  type: float
  sample: 0.213
models:
  description: Model ids the server serves (C(GET /v1/models)).
  returned: success
  type: list
  elements: str
  sample: ["Qwen/Qwen2.5-7B-Instruct"]
elapsed_s:
  description: Seconds the module took in all.
  returned: always
  type: float
  sample: 183.1
url:
  description: The O(url) option, on failure.
  returned: failure
  type: str
  sample: http://10.0.0.1:8000
model:
  description: The O(model) option, on failure.
  returned: failure
  type: str
  sample: Qwen/Qwen2.5-7B-Instruct
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.systemd_unit import (
    EXIT_PROPERTIES,
    exit_reason,
    parse_show,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.vllm_client import VllmError, wait_ready


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True, default=""),
            model=dict(type="str", required=True),
            prompt=dict(type="str", default="The capital of France is"),
            max_tokens=dict(type="int", default=4, no_log=False),
            timeout=dict(type="int", default=900),
            interval=dict(type="float", default=5),
            service=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] < 0 or p["interval"] <= 0:
        module.fail_json(msg="timeout must be >= 0 and interval > 0", url=p["url"], model=p["model"])
    if p["max_tokens"] < 1:
        module.fail_json(msg="max_tokens must be at least 1; got %d" % p["max_tokens"], url=p["url"], model=p["model"])

    exited = None
    if p["service"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        argv = [systemctl, "show", p["service"]] + ["--property=%s" % name for name in EXIT_PROPERTIES]

        def show():
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg="systemctl show %s failed: %s" % (p["service"], err.strip()), url=p["url"])
            return parse_show(out)

        started = show()

        def exited():
            return exit_reason(p["service"] + ".service", started, show())

    start = time.monotonic()
    try:
        ready = wait_ready(
            p["url"],
            p["api_key"] or "",
            p["model"],
            p["prompt"],
            p["max_tokens"],
            p["timeout"],
            interval=p["interval"],
            log=module.debug,
            exited=exited,
        )
    except VllmError as exc:
        module.fail_json(
            msg=str(exc), url=p["url"], model=p["model"], elapsed_s=round(time.monotonic() - start, 3), changed=False
        )
    module.exit_json(changed=False, elapsed_s=round(time.monotonic() - start, 3), **ready)


if __name__ == "__main__":
    main()
