# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ray Serve LLM mode: the checks on ray_serve_models, and whether rolling replacements surge."""

from ansible.errors import AnsibleFilterError


def _gpus(declared):
    return None if declared in (None, "") else int(declared)


def ray_serve_problems(models, cluster, declared_gpus=None, ray_version=None, vllm_version=None, allow_mismatch=False):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.serve_models import model_problems

    try:
        return model_problems(
            models,
            str(cluster),
            declared_gpus=_gpus(declared_gpus),
            ray_version=ray_version,
            vllm_version=vllm_version,
            allow_mismatch=bool(allow_mismatch),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("ray_serve_problems: %s" % exc)


def ray_serve_surge(models, declared_gpus, ray_version, max_surge_percent):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.serve_models import surge_plan

    try:
        return surge_plan(models, _gpus(declared_gpus), str(ray_version), int(max_surge_percent or 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("ray_serve_surge: %s" % exc)


class FilterModule:
    def filters(self):
        return {"ray_serve_problems": ray_serve_problems, "ray_serve_surge": ray_serve_surge}
