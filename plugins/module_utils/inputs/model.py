# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The model role's input checks (roles/model/tasks/validate.yml)."""

import os
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import truthy
from ansible_collections.rayvllm.fleet.plugins.module_utils.inputs.common import text


def problems(values, host, model, context):
    """values: the model role's variables (an unset model_path is '<unset>')."""
    v, found = values, []
    path, source = v.get("model_path"), v.get("model_source")
    if not (
        isinstance(path, str)
        and path != "<unset>"
        and re.match(r"^/.+", path)
        and source in ("hf", "controller", "shared")
        and (source != "hf" or len(text(v.get("model_hf_repo") or "")) > 0)
        and (source != "controller" or len(text(v.get("model_controller_path") or "")) > 0)
    ):
        found.append(
            "On %s: model_path must be an absolute directory (got '%s'), model_source one of hf, controller, shared "
            "(got '%s'); model_source=hf needs model_hf_repo, model_source=controller needs model_controller_path."
            % (host, text(path), text(source))
        )
    revision = text(v.get("model_hf_revision") or "")
    if source == "hf" and not (
        re.match(r"^[0-9a-f]{40}$", revision) or (truthy(v.get("model_hf_allow_unpinned")) and revision)
    ):
        found.append(
            "model_hf_revision='%s' on %s is not a commit hash: a branch or tag can point at other files tomorrow, on "
            "some nodes and not others. Set model_hf_revision to the commit's 40-hex id (the hub's \"Files and "
            'versions" page, or `huggingface-cli repo info`), or set model_hf_allow_unpinned: true.' % (revision, host)
        )
    copy = v.get("model_controller_path")
    if source == "controller" and copy and not os.path.isfile(os.path.join(str(copy), "config.json")):
        found.append(
            "model_controller_path=%s has no config.json on the controller: point it at a Hugging Face model "
            "directory." % text(copy)
        )
    return found
