#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_serve_apply
short_description: Apply a Ray Serve LLM config to a Ray cluster declaratively and wait until it runs
version_added: "0.3.0"
description:
  - Builds the Serve config of a C(ray_serve) cluster from O(models) and O(settings) (one application, built by
    C(ray.serve.llm:build_openai_app), behind the collection's key-checking ingress), reads the running config
    (C(GET /api/serve/applications/) on the Ray dashboard), and sends the new one (C(PUT), what C(serve deploy) does)
    only when they differ. Then it waits until every application is C(RUNNING) with the config it sent.
  - A config equal to the running one sends nothing and reports no change.
  - Replicas and autoscaling are deployment overrides (applied in place, no replica restarts); C(engine_kwargs),
    the weights, the venv or the environment change the application's code version, and Serve replaces every
    replica of it (rolling). The result's RV(change) says which, and which models would be left without a serving
    replica (RV(change.last_replica_down)), so a play can take the cluster out of a router's rotation first (run
    it in check mode to plan).
  - The API key is not an input; the ingress reads it from the C(api_key_file) of O(settings) on the nodes, so no
    Serve config, log or return value holds it. The Ray token is a C(no_log) option or a file.
  - Uses the Python standard library only; run it on any host that reaches the dashboard (usually the head).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  dashboard_url:
    description: Base URL of the Ray dashboard, for example V(http://10.0.0.1:8265).
    type: str
    required: true
  token:
    description: "The cluster's Ray token (C(RAY_AUTH_MODE=token)), sent as C(Authorization: Bearer <token>)."
    type: str
  token_file:
    description: Path, on the host the module runs on, of a file holding that token. Mutually exclusive with O(token).
    type: path
  models:
    description:
      - The cluster's models (C(ray_serve_models)); each a dict with C(name), C(model_path),
        C(tensor_parallel_size), C(pipeline_parallel_size), C(min_replicas), C(max_replicas),
        C(target_ongoing_requests), C(engine_kwargs) and optionally C(max_ongoing_requests),
        C(autoscaling_config) (more autoscaling keys, e.g. C(downscale_delay_s)), C(accelerator_type).
      - Required unless O(config) is given.
    type: list
    elements: dict
  config:
    description:
      - A whole Serve config to apply instead of one built from O(models) and O(settings); for a rollback, the
        RV(previous) of an earlier call. Mutually exclusive with O(models).
    type: dict
  settings:
    description:
      - "The cluster's Serve settings: C(app_name), C(python) (the vLLM venv's interpreter, the same path on every
        node), C(ingress_dir) (the directory of C(rayvllm_serve_ingress.py) on every node), C(api_key_file),
        C(http_host), C(http_port), C(proxy_location) (V(HeadOnly) or V(EveryNode)), C(env_vars), C(ingress_replicas),
        C(max_surge_percent) (0 for none; Ray 2.60 or later), C(model_sources) (model name to the path its replicas
        load; default its C(model_path)), C(code_version) (a digest of the shipped C(rayvllm_serve_ingress.py): a new
        one rebuilds the application), C(venv_version) (default: a digest of the record of what the venv of C(python)
        holds, read on this host; a venv installed again at the same path rebuilds the application)."
      - Required with O(models).
    type: dict
  timeout:
    description: Seconds to wait until every application is RUNNING with the new config.
    type: int
    default: 1800
  interval:
    description: Seconds between two polls.
    type: float
    default: 5
attributes:
  check_mode:
    description: Reads the running config and reports what would change (and the diff); sends nothing.
    support: full
  diff_mode:
    description: The running and the new config, as indented JSON (no secret is part of either).
    support: full
notes:
  - C(proxy_location) and C(http_options) are read by Serve only when it starts; a config that changes them on a
    running Serve fails with a message (restart Ray, or C(serve shutdown), then run again).
"""

EXAMPLES = r"""
- name: Serve two models on the cluster
  rayvllm.fleet.ray_serve_apply:
    dashboard_url: "http://10.0.0.1:8265"
    token_file: /etc/ray/auth_token
    models:
      - {name: llama-8b, model_path: /srv/models/llama-8b, tensor_parallel_size: 1, pipeline_parallel_size: 1,
         min_replicas: 1, max_replicas: 4, target_ongoing_requests: 16, engine_kwargs: {max_model_len: 8192}}
    settings:
      app_name: llm
      python: /opt/vllm/0.29.0-ray2.60.0/bin/python
      ingress_dir: /usr/local/lib/rayvllm/ray_serve
      api_key_file: /etc/vllm/ray_serve_api_key
      http_host: 0.0.0.0
      http_port: 8000
      proxy_location: HeadOnly
      ingress_replicas: 2
      max_surge_percent: 1
  register: serve
"""

RETURN = r"""
config:
  description: The config sent (or that would be sent), normalized.
  returned: always
  type: dict
change:
  description: What applying the config does.
  returned: always
  type: dict
  contains:
    kind:
      description: V(none), V(start) (Serve was not running), V(in_place), V(rolling) or V(serve_restart).
      type: str
    models:
      description: Per model - V(new), V(removed), V(unchanged), V(in_place), V(engine) (its engine or weights
        changed, so it is replaced) or V(rebuilt) (replaced because its application changed).
      type: dict
    last_replica_down:
      description: Models a rolling replacement leaves without a serving replica for a while (no surge, and one
        replica of the model or of the application's ingress), or that are removed.
      type: list
      elements: str
    http_restart:
      description: C(proxy_location)/C(http_options) keys that differ from the running Serve's.
      type: list
      elements: str
  sample: {"kind": "in_place", "models": {"tiny-llama": "in_place"}, "last_replica_down": [], "http_restart": []}
models:
  description: The model ids the config sent (or that would be sent) serves.
  returned: always
  type: list
  elements: str
previous:
  description:
    - The config Serve ran before this call, normalized, as O(config) takes it to put it back; V(null) when Serve
      ran no application deployed from a config. No secret is part of it.
  returned: always
  type: dict
previous_models:
  description: The model ids RV(previous) serves.
  returned: always
  type: list
  elements: str
sent:
  description: Whether a config was sent to Serve (false in check mode, when nothing changes, or when it failed before).
  returned: always
  type: bool
status:
  description: Per application - C(status), C(message), and per deployment its status, message and replicas.
  returned: always
  type: dict
waited_s:
  description: Seconds waited until every application ran the new config.
  returned: when changed and not in check mode
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.python_venv import record_digest
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import read_token_file
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.serve_models import supports_max_surge
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_serve import (
    ServeError,
    get_details,
    parse_status,
    put_config,
    running_config,
    wait_running,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.serve_config import (
    build_config,
    classify,
    normalize,
    restorable,
    served_models,
    to_text,
)

REQUIRED_SETTINGS = ("app_name", "python", "ingress_dir", "api_key_file", "http_host", "http_port")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dashboard_url=dict(type="str", required=True),
            token=dict(type="str", no_log=True),
            token_file=dict(type="path"),
            models=dict(type="list", elements="dict"),
            config=dict(type="dict"),
            settings=dict(type="dict"),
            timeout=dict(type="int", default=1800),
            interval=dict(type="float", default=5),
        ),
        mutually_exclusive=[("token", "token_file"), ("models", "config")],
        required_one_of=[("models", "config")],
        required_by={"models": "settings"},
        supports_check_mode=True,
    )
    p = module.params
    settings = dict(p["settings"] or {})
    if p["models"] is not None and settings.get("python") and "venv_version" not in settings:
        settings["venv_version"] = record_digest(settings["python"])
    if p["models"] is not None:
        missing = [k for k in REQUIRED_SETTINGS if settings.get(k) in (None, "")]
        if missing:
            module.fail_json(msg="settings lacks %s" % ", ".join(missing))
        if settings.get("max_surge_percent") and not supports_max_surge(settings.get("ray_version", "2.60.0")):
            module.fail_json(
                msg="max_surge_percent needs Ray 2.60.0 or later (ray_version %s)" % settings["ray_version"]
            )
    elif not (p["config"].get("applications") or []):
        module.fail_json(msg="config has no applications: nothing to apply")
    token = p["token"]
    if p["token_file"]:
        try:
            token = read_token_file(p["token_file"])
        except ValueError as exc:
            module.fail_json(msg=str(exc))
    url = p["dashboard_url"]
    desired = build_config(p["models"], settings) if p["models"] is not None else p["config"]
    apps = [a["name"] for a in desired["applications"]]

    try:
        details = get_details(url, token)
    except ServeError as exc:
        module.fail_json(msg="cannot read the running Serve config: %s" % exc)
    running = running_config(details)
    status = parse_status(details)
    change = classify(desired, running, status, max_surge=bool(settings.get("max_surge_percent")))
    previous = restorable(running)
    result = dict(
        changed=change["changed"],
        config=normalize(desired),
        models=served_models(desired),
        change=change,
        status=status,
        previous=previous,
        previous_models=served_models(previous),
        sent=False,
    )
    if module._diff:
        result["diff"] = dict(
            before=to_text(running), after=to_text(desired), before_header="running Serve config", after_header="new"
        )
    if change["http_restart"] and running is not None and running.get("applications"):
        module.fail_json(
            msg="the running Serve has other %s than the config (%s): Serve reads them only when it starts. Restart "
            "the cluster's Ray (or `serve shutdown`, which stops every model), then run again."
            % (" and ".join(change["http_restart"]), {k: desired[k] for k in change["http_restart"]}),
            **result,
        )
    if not change["changed"] or module.check_mode:
        module.exit_json(**result)

    started = time.monotonic()
    try:
        put_config(url, desired, token)
    except ServeError as exc:
        module.fail_json(msg="Serve refused the config: %s" % exc, **result)
    result["sent"] = True

    want = normalize(desired)

    def fetch():
        current = get_details(url, token)
        got = parse_status(current)
        if normalize(running_config(current)) != want:
            # Not applied yet (or replaced by someone else's deploy): report it as not running.
            for name in apps:
                got.setdefault(name, {"status": "DEPLOYING", "message": "", "deployments": {}})
                if got[name]["status"] == "RUNNING":
                    got[name] = dict(got[name], status="DEPLOYING", message="the new config is not applied yet")
        return got

    ok, status, problems, waited = wait_running(fetch, apps, p["timeout"], p["interval"])
    result.update(status=status, waited_s=round(time.monotonic() - started, 1))
    if not ok:
        why = ("within %ss" % p["timeout"]) if waited >= p["timeout"] else ("(%.0f s after it was sent)" % waited)
        module.fail_json(
            msg="Ray Serve did not run the new config %s: %s. Details: `serve status` on the head, or the "
            "Serve logs under Ray's session directory (logs/serve/)." % (why, "; ".join(problems)),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
