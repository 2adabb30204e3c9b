# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The model role's input checks (roles/model/tasks/validate.yml)."""

import os
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import SYSTEM_DIRS, normal_path, truthy
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    mapping,
    node,
    not_absolute,
    text,
)

# A repository id on the Hugging Face hub: owner/name (letters, digits, '-', '_', '.').
HF_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
# The settings whose directories hold what the units run from or read (venvs, configuration, Ray's sessions):
# model_path must be none of them, inside none of them, and hold none of them.
OWN_DIRS = ("ray_install_root", "vllm_install_root", "ray_config_dir", "vllm_config_dir", "ray_temp_dir")


def path_problems(path, host, settings, state):
    """What makes ``path`` (model_path, absolute) unusable as a model's own directory on ``host``: not written
    normalised, a system directory, one of the roles' own directories (``settings``: the node's shared
    settings) or related to one, or (``state``: rayvllm.fleet.host_probe's path state on the host, when read) a
    real directory without config.json, which the role would move."""
    found = []
    normal = normal_path(path)
    if normal != path:
        found.append(
            "model_path on %s is '%s': write it normalised, without '..', '.', '//' or a trailing '/' (it resolves to "
            "%s; the role moves and links this exact path)." % (host, path, normal)
        )
    if normal in SYSTEM_DIRS:
        found.append(
            "model_path on %s is %s, a system directory: the model role moves a model_path that is a real directory "
            "under its revisions directory and links it, and reset.yml removes it. Give the model a directory of its "
            "own, e.g. /srv/models/<name>." % (host, normal)
        )
    for name in OWN_DIRS:
        own = settings.get(name)
        if not isinstance(own, str) or not own.startswith("/"):
            continue
        own = normal_path(own)
        if normal == own or own.startswith(normal.rstrip("/") + "/") or normal.startswith(own.rstrip("/") + "/"):
            relation = "is" if normal == own else "holds" if own.startswith(normal.rstrip("/") + "/") else "is inside"
            found.append(
                "model_path %s on %s %s %s=%s, which the units run from or read (venvs are pruned and replaced "
                "there). Give the model a directory of its own, e.g. /srv/models/<name>."
                % (normal, host, relation, name, own)
            )
    if isinstance(state, dict) and state.get("dir") and not state.get("link") and not state.get("config"):
        found.append(
            "model_path %s on %s is a directory that holds no config.json: not a model's weights, which the model "
            "role would move under model_revisions_dir as the weights staged before revisions. Point model_path at "
            "a path of its own (it may not exist yet: the role creates it), or remove the directory if it is an "
            "empty leftover." % (normal, host)
        )
    return found


def problems(values, host, model, context):
    """values: the model role's variables (an unset model_path is '<unset>'); context: ``probe``
    (rayvllm.fleet.host_probe's result on the host, whose ``paths`` may hold model_path's state)."""
    v, found = values, []
    path, source = v.get("model_path"), v.get("model_source")
    if isinstance(path, str) and path.startswith("/"):
        # Its default derives from model_path, whose own message comes first when model_path is unusable.
        found.extend(not_absolute(v, ("model_revisions_dir",), host))
    # Each unusable setting on its own (a single message used to list every requirement, the fine ones included).
    if not (isinstance(path, str) and path != "<unset>" and re.match(r"^/.+", path)):
        found.append(
            "model_path on %s is %s: not an absolute directory. Set model_path to where the weights live on every "
            "node, e.g. /srv/models/<name>." % (host, "unset" if path == "<unset>" else "'%s'" % text(path))
        )
    if source not in ("hf", "controller", "shared"):
        found.append(
            "model_source on %s is '%s': give one of hf (the hub, with model_hf_repo), controller (a copy from the "
            "controller's model_controller_path) or shared (already on every node)." % (host, text(source))
        )
    for wanted, key in (("hf", "model_hf_repo"), ("controller", "model_controller_path")):
        if source == wanted and not text(v.get(key) or ""):
            found.append("model_source=%s on %s needs %s: set it." % (wanted, host, key))
    if isinstance(path, str) and path.startswith("/"):
        probe = context.get("probe") if isinstance(context.get("probe"), dict) else {}
        state = mapping(probe.get("paths")).get(path) if source in ("hf", "controller") else None
        found.extend(path_problems(path, host, node(model, host).get("settings") or {}, state))
    repo = v.get("model_hf_repo")
    if source == "hf" and repo and not (isinstance(repo, str) and HF_REPO_RE.match(repo)):
        found.append(
            "model_hf_repo on %s is '%s': give the hub's repository id, owner/name (e.g. meta-llama/Llama-3.1-8B), "
            "not a URL or a path; the revision goes in model_hf_revision." % (host, text(repo))
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
    for key, least, meaning in (
        ("model_distribution_bwlimit", 0, "megabits per second a node may take while spreading weights, 0 for no cap"),
        ("model_distribution_timeout", 1, "seconds the spread of one revision may take"),
    ):
        value = v.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < least:
            found.append("%s on %s is %d: give the %s (at least %d)." % (key, host, value, meaning, least))
    copy = v.get("model_controller_path")
    if source == "controller" and copy and not os.path.isfile(os.path.join(str(copy), "config.json")):
        found.append(
            "model_controller_path=%s has no config.json on the controller: point it at a Hugging Face model "
            "directory." % text(copy)
        )
    return found
