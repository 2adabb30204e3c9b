# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
short_description: Load the collection's controller-side Python once per run, before Ansible forks its workers
description:
  - Adds no variables. When Ansible loads it, in C(ansible-playbook)'s own process before the first task, it imports
    the collection's filter and lookup plugins and the C(module_utils) they import, and reads the files they read
    (each role's C(meta/argument_specs.yml) and the defaults the fleet model shares).
  - Ansible runs each task on each host in a worker process forked from that process, and the collection's Python is
    compiled from source on every import (Ansible's collection loader keeps no bytecode). Without this plugin every
    worker that uses a C(rayvllm.fleet) filter imports, compiles and reads all of that again; with it, the workers
    inherit it (the figures are in the project's C(docs/benchmarks.md)).
  - Enabled in the project's C(ansible.cfg) (C(vars_plugins_enabled), beside Ansible's C(host_group_vars), which
    loads C(group_vars/) and C(host_vars/)). Keep both when you use an C(ansible.cfg) of your own; without it the
    playbooks run the same, only slower.
  - A file that fails to import is left to fail where a task uses it, with Ansible's own message (logged at -vvv).
"""

import ast
import os
from importlib import import_module

from ansible.plugins.vars import BaseVarsPlugin
from ansible.utils.display import Display

display = Display()

COLLECTION = "ansible_collections.rayvllm.fleet"
PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(PLUGINS)
# The kinds of plugins that run on the controller, in its workers (the modules run on the hosts).
KINDS = ("filter", "lookup")
_LOADED = None  # how many modules this process loaded, once it has


def collection_imports(source, root=ROOT):
    """The modules of this collection that a Python source imports, at its top or inside its functions (the
    filters import their module_utils on first use): ``from <package> import <module>`` names the module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(COLLECTION + "."):
            found.append(node.module)
            found.extend(node.module + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if _is_module(name, root)]


def _is_module(name, root):
    if not name.startswith(COLLECTION + "."):
        return False
    path = os.path.join(root, *name[len(COLLECTION) + 1 :].split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def controller_modules(plugins=PLUGINS):
    """Each filter and lookup plugin of the collection, then the modules they import, in that order, once each."""
    names = []
    for kind in KINDS:
        folder = os.path.join(plugins, kind)
        for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if entry.endswith(".py") and not entry.startswith("_"):
                names.append("%s.plugins.%s.%s" % (COLLECTION, kind, entry[:-3]))
                with open(os.path.join(folder, entry), encoding="utf-8") as handle:
                    names.extend(collection_imports(handle.read(), os.path.dirname(plugins)))
    return list(dict.fromkeys(names))


def preload(plugins=PLUGINS):
    """Import the controller-side modules and call the ``preload()`` of each that has one (the files it reads once
    per process). Returns the names imported; a module that fails is skipped (its task fails as without this)."""
    loaded = []
    for name in controller_modules(plugins):
        try:
            module = import_module(name)
            if callable(getattr(module, "preload", None)):
                module.preload()
        except Exception as exc:  # pylint: disable=broad-except  # the task that uses it reports it
            display.vvv("rayvllm.fleet.preload: %s not loaded: %s: %s" % (name, type(exc).__name__, exc))
            continue
        loaded.append(name)
    return loaded


class VarsModule(BaseVarsPlugin):
    # One instance for the whole run (Ansible keeps a stateless plugin's instance): the imports happen once.
    is_stateless = True

    def __init__(self):
        global _LOADED
        super().__init__()
        if _LOADED is None:
            _LOADED = len(preload())
            display.vvv("rayvllm.fleet.preload: %d modules of the collection loaded before the workers" % _LOADED)

    def get_vars(self, loader, path, entities, cache=True):
        return {}
