#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: python_venv
short_description: A venv holding pinned requirements, installed with uv or pip only when its record differs
version_added: "0.3.0"
description:
  - Creates O(path) with C(python -m venv) from O(interpreter) when it does not exist, installs O(requirements)
    into it and removes O(remove), then records what it installed in C(<path>/.rayvllm-requirements). The install
    runs only when that record differs from the request, so a second run changes nothing, and check mode reports
    exactly what a run would do.
  - With O(installer=uv) the install runs with uv O(uv_version), itself put into a small venv of its own under
    O(uv_root) with pip, from the same wheelhouse or index (so the wheelhouse of an air-gapped fleet holds the uv
    wheel). uv unpacks wheels in parallel and hard-links them from its cache (O(uv_cache)) into the venv, so a later
    venv sharing wheels with an earlier one (an upgrade of vLLM that keeps torch) is staged in seconds.
  - The installer is not part of the record, so switching it does not reinstall a venv.
  - Reads, without running the venv, its Python version (C(pyvenv.cfg)) and the installed versions of the
    distributions O(requirements) name (their C(.dist-info) directories).
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  path:
    description: The venv's directory.
    type: path
    required: true
  interpreter:
    description: The Python the venv is built from.
    type: path
    default: /usr/bin/python3
  requirements:
    description: Requirement strings, such as C(ray[default]==2.60.0).
    type: list
    elements: str
    required: true
  remove:
    description: Distributions uninstalled right after the install; part of the record.
    type: list
    elements: str
    default: []
  find_links:
    description:
      - A wheelhouse directory on the host; packages come from it alone (C(--no-index)). Empty to use an index.
    type: str
    default: ""
  index_url:
    description: The package index, when O(find_links) is empty; empty for the installer's default index.
    type: str
    default: ""
  source_variable:
    description: The inventory variable that set O(find_links), named when the wheelhouse is missing.
    type: str
    default: find_links
  installer:
    description: What installs the requirements. C(pip) is the fallback (slower; compiles every module's bytecode).
    type: str
    choices: [uv, pip]
    default: uv
  uv_version:
    description: The exact uv release used with O(installer=uv).
    type: str
    default: ""
  uv_root:
    description: Directory holding C(<uv_version>/bin/uv), uv's own venv per version.
    type: path
    default: /opt/rayvllm/uv
  uv_cache:
    description: uv's cache directory on the host (hard-linked into the venvs); empty to use none.
    type: str
    default: /var/cache/rayvllm/uv
  compile_bytecode:
    description:
      - Compile the installed modules' bytecode (pip does by default). Services run as an unprivileged user that
        cannot write C(__pycache__) into the root-owned venv, so without bytecode every start compiles what it
        imports again.
      - With uv, the bytecode of a module that a venv beside this one (same parent directory, such as the version
        that serves before an upgrade) holds as the very same file, linked from uv's cache, is linked from that
        venv instead of compiled again; only the other modules compile, on every core.
    type: bool
    default: true
  link:
    description:
      - A symbolic link naming the venv that serves (the C(ray) and C(vllm) roles' C(<root>/current)); its target
        is returned as RV(link_target), read in the same call.
    type: path
  prune_keep:
    description:
      - When set, after the install the venvs beside O(path) (its parent directory) are pruned as
        M(rayvllm.fleet.venv_prune) does with O(path) as its C(current) and this as its C(keep); the venv O(link)
        points at is never removed. Unset prunes nothing.
    type: int
attributes:
  check_mode:
    description: Reports whether the venv would be installed; changes nothing.
    support: full
  diff_mode:
    description: The venv's record before and after, and with O(prune_keep) the venvs beside it.
    support: full
"""

EXAMPLES = r"""
- name: Ray's venv from the wheelhouse, with uv
  rayvllm.fleet.python_venv:
    path: /opt/ray/2.60.0
    requirements: ["ray[default]==2.60.0"]
    find_links: /srv/wheelhouse/ray
    source_variable: ray_wheelhouse_dir
    uv_version: "0.13.9"
"""

RETURN = r"""
python_version:
  description: The venv's Python X.Y.Z (empty in check mode before the venv exists).
  returned: always
  type: str
  sample: "3.11.2"
versions:
  description: Installed version of each distribution O(requirements) names (normalized names), read from the venv.
  returned: always
  type: dict
  sample:
    ray: "2.60.0"
installed:
  description: Whether the requirements were installed by this run (in check mode, would be).
  returned: always
  type: bool
bytecode_reused:
  description:
    - How many bytecode files the install took from the venvs beside this one (same parent directory) instead of
      compiling them, each for a module whose file uv linked from its cache into both venvs.
  returned: when uv installed the venv with O(compile_bytecode)
  type: int
  sample: 15913
link_target:
  description: The real path O(link) points at; empty when O(link) is unset or not a link.
  returned: always
  type: str
  sample: /opt/ray/2.59.0
pruned:
  description: Venvs removed beside O(path) (in check mode, that would be removed).
  returned: when O(prune_keep) is set
  type: list
  elements: str
  sample: ["/opt/ray/2.58.0"]
kept:
  description: The venvs beside O(path) left in place, O(path) first, then newest first.
  returned: when O(prune_keep) is set
  type: list
  elements: str
  sample: ["/opt/ray/2.60.0", "/opt/ray/2.59.0"]
in_use:
  description: Venvs that would have been pruned but a running process uses them.
  returned: when O(prune_keep) is set
  type: list
  elements: str
  sample: []
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.python_venv import (
    MARKER,
    bytecode_donors,
    compile_command,
    install_commands,
    link_donor_bytecode,
    installed_versions,
    marker_text,
    python_version,
    requirement_name,
    source_args,
    uv_tool_commands,
)
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.venv_prune import link_target, prune


def run(module, argv, environ=None):
    rc, out, err = module.run_command(argv, environ_update=environ or {})
    if rc != 0:
        module.fail_json(
            msg="%s failed (exit %d): %s" % (" ".join(argv[:4]), rc, (err or out).strip()[-2000:]),
            rc=rc,
            stdout=out,
            stderr=err,
        )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            interpreter=dict(type="path", default="/usr/bin/python3"),
            requirements=dict(type="list", elements="str", required=True),
            remove=dict(type="list", elements="str", default=[]),
            find_links=dict(type="str", default=""),
            index_url=dict(type="str", default=""),
            source_variable=dict(type="str", default="find_links"),
            installer=dict(type="str", choices=["uv", "pip"], default="uv"),
            uv_version=dict(type="str", default=""),
            uv_root=dict(type="path", default="/opt/rayvllm/uv"),
            uv_cache=dict(type="str", default="/var/cache/rayvllm/uv"),
            compile_bytecode=dict(type="bool", default=True),
            link=dict(type="path"),
            prune_keep=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    venv = os.path.normpath(p["path"])
    if p["prune_keep"] is not None and p["prune_keep"] < 0:
        module.fail_json(msg="prune_keep must be 0 or more, got %d" % p["prune_keep"])
    # In check mode a wheelhouse the same run would bring (python_venv_wheelhouse_source) is not there yet.
    if p["find_links"] and not os.path.isdir(p["find_links"]) and not module.check_mode:
        module.fail_json(
            msg='%s=%s does not exist on this host. Copy or mount the wheels there, or set %s: "" to install from '
            "an index." % (p["source_variable"], p["find_links"], p["source_variable"])
        )
    args = source_args(p["find_links"], p["index_url"])
    want = marker_text(p["interpreter"], p["requirements"], args, p["remove"])
    marker = os.path.join(venv, MARKER)
    try:
        with open(marker) as handle:
            have = handle.read()
    except OSError:
        have = ""
    installed = have != want
    result = dict(changed=installed, installed=installed, diff=dict(before=have, after=want))
    if installed and not module.check_mode:
        environ = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        uv = None
        if p["installer"] == "uv":
            if not p["uv_version"]:
                module.fail_json(msg="installer=uv needs uv_version (an exact uv release).")
            tool = os.path.join(p["uv_root"], p["uv_version"])
            uv = os.path.join(tool, "bin", "uv")
            if not os.access(uv, os.X_OK):
                for argv in uv_tool_commands(p["interpreter"], tool, p["uv_version"], args):
                    run(module, argv, environ)
            # Never a Python of uv's own, nor a uv.toml of the host's: the venv is what the arguments say.
            environ.update(UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")
            if p["uv_cache"]:
                environ["UV_CACHE_DIR"] = p["uv_cache"]
            else:
                environ["UV_NO_CACHE"] = "1"
        if not os.path.exists(os.path.join(venv, "bin", "python")):
            run(module, [p["interpreter"], "-m", "venv", venv], environ)
        for argv in install_commands(
            p["installer"], venv, p["requirements"], args, p["remove"], uv=uv, compile_bytecode=p["compile_bytecode"]
        ):
            run(module, argv, environ)
        if p["installer"] == "uv" and p["compile_bytecode"]:
            result["bytecode_reused"] = link_donor_bytecode(venv, bytecode_donors(venv))
            run(module, compile_command(venv), environ)
        # The record last: an install cut short is redone by the next run.
        with open(marker, "w") as handle:
            handle.write(want)
        os.chmod(marker, 0o644)
    result["python_version"] = python_version(venv)
    result["versions"] = installed_versions(venv, [requirement_name(r) for r in p["requirements"]])
    result["link_target"] = link_target(p["link"])
    if p["prune_keep"] is not None:
        pruned = prune(os.path.dirname(venv), venv, p["prune_keep"], p["link"] or "", module.check_mode)
        result.update(kept=pruned["kept"], pruned=pruned["pruned"], in_use=pruned["in_use"])
        result["changed"] = result["changed"] or bool(pruned["pruned"])
        result["diff"] = [result["diff"], pruned["diff"]]
        if pruned["error"]:
            module.fail_json(msg=pruned["error"], **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
