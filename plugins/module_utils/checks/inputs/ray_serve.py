# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The ray_serve role's settings (roles/ray_serve/tasks/validate.yml): one message per unusable setting. Its models
(ray_serve_models) are checked by module_utils/checks/serve_models.py (filter rayvllm.fleet.ray_serve_problems)."""

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import count, environment, one_of, port, shown
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import not_absolute

APP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Set by the role itself: the cluster's token, the API key and the ingress's import path.
OWNED_ENVIRONMENT_RE = re.compile(r"^(RAY_AUTH_|VLLM_API_KEY$|PYTHONPATH$)")


def problems(values, host, model, context):
    v, found, where = values, [], "on " + host
    found.extend(not_absolute(v, ("ray_serve_ingress_dir", "ray_serve_api_key_file"), host))
    one_of(found, "ray_serve_proxy_location", v.get("ray_serve_proxy_location"), where, ("HeadOnly", "EveryNode"))
    port(found, "ray_serve_http_port", v.get("ray_serve_http_port"), where, fix="Set it to the cluster's vllm_port")
    count(found, "ray_serve_ingress_replicas", v.get("ray_serve_ingress_replicas"), where, minimum=1)
    surge = count(found, "ray_serve_max_surge_percent", v.get("ray_serve_max_surge_percent"), where)
    if surge is not None and surge > 100:
        found.append(
            "ray_serve_max_surge_percent %s is %d: more than 100. Set it from 0 to 100 (the share of a model's "
            "replicas started beside the old ones during an update)." % (where, surge)
        )
    name = v.get("ray_serve_app_name")
    if not (isinstance(name, str) and APP_NAME_RE.match(name)):
        found.append(
            "ray_serve_app_name %s is %s: not an application name. Use letters, digits, '.', '_' and '-', starting "
            "with a letter or digit." % (where, shown(name))
        )
    env = environment(found, "ray_serve_environment", v.get("ray_serve_environment"), where)
    owned = sorted(k for k in (env or {}) if isinstance(k, str) and OWNED_ENVIRONMENT_RE.match(k))
    if owned:
        found.append(
            "ray_serve_environment %s sets %s: the role sets RAY_AUTH_*, VLLM_API_KEY and PYTHONPATH itself. Remove "
            "them (the token and the key come from the cluster's files)." % (where, ", ".join(owned))
        )
    return found
