"""The preload vars plugin: which of the collection's modules it loads before Ansible forks its workers, that it
reads the files they read once per process, and that the project's configurations enable it."""

import configparser
import sys
from pathlib import Path

import yaml

from ansible_collections.rayvllm.fleet.plugins.vars import preload as plugin

ROOT = Path(__file__).resolve().parents[4]
PREFIX = "ansible_collections.rayvllm.fleet.plugins."


def test_imports_are_found_at_the_top_and_inside_functions_and_name_modules_not_functions():
    source = (
        "import os\n"
        "from ansible.errors import AnsibleFilterError\n"
        "from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import truthy\n"
        "def f():\n"
        "    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import inputs, no_such_module\n"
        "    import ansible_collections.rayvllm.fleet.plugins.module_utils.checks.plain_data\n"
    )
    # module_utils itself has no __init__.py (a namespace package): nothing to load there; its groups have one.
    assert plugin.collection_imports(source) == [
        PREFIX + "module_utils.checks.values",
        PREFIX + "module_utils.checks",
        PREFIX + "module_utils.checks.inputs",
        PREFIX + "module_utils.checks.plain_data",
    ]


def test_every_filter_and_lookup_and_what_they_import_but_no_module():
    names = plugin.controller_modules()
    assert len(names) == len(set(names))
    for kind in ("filter", "lookup"):
        for path in (ROOT / "plugins" / kind).glob("*.py"):
            assert "%s%s.%s" % (PREFIX, kind, path.stem) in names
    # What the filters import on first use (the checks' package and the specs, the fleet model).
    assert PREFIX + "module_utils.checks.inputs" in names
    assert PREFIX + "module_utils.checks.inputs.spec" in names
    assert PREFIX + "module_utils.fleet_model" in names
    assert not [name for name in names if name.startswith(PREFIX + "modules")]


def test_preload_leaves_the_roles_checks_specs_and_shared_defaults_loaded_in_the_process(monkeypatch):
    from ansible_collections.rayvllm.fleet.plugins.filter import fleet_model as fleet_model_filter
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import inputs
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec

    # As in a process that has read nothing yet (other tests may have).
    monkeypatch.setattr(spec, "_SPECS", {})
    monkeypatch.setattr(fleet_model_filter, "_DEFAULTS", None)
    loaded = plugin.preload()
    assert loaded == plugin.controller_modules()

    for module, _function in inputs.ROLES.values():
        assert "%s.%s" % (inputs.__name__, module) in sys.modules
    with_specs = {path.parts[-3] for path in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    assert with_specs <= set(spec._SPECS)
    assert "fleet_facts" in with_specs and "host_prep" in with_specs
    assert fleet_model_filter._DEFAULTS is not None


def test_a_module_that_does_not_import_is_skipped_not_raised(tmp_path):
    (tmp_path / "filter").mkdir()
    (tmp_path / "filter" / "no_such_filter.py").write_text("raise RuntimeError('broken')\n")
    (tmp_path / "filter" / "_private.py").write_text("")
    assert plugin.controller_modules(str(tmp_path)) == [PREFIX + "filter.no_such_filter"]
    assert plugin.preload(str(tmp_path)) == []


def test_the_plugin_adds_no_variables():
    assert plugin.VarsModule().get_vars(None, str(ROOT), []) == {}


def test_the_project_and_the_sandbox_converge_enable_it_beside_host_group_vars():
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    enabled = [name.strip() for name in config["defaults"]["vars_plugins_enabled"].split(",")]
    assert enabled == ["host_group_vars", "rayvllm.fleet.preload"]
    molecule = yaml.safe_load((ROOT / "molecule/default/molecule.yml").read_text())
    options = molecule["provisioner"]["config_options"]["defaults"]["vars_plugins_enabled"]
    assert [name.strip() for name in options.split(",")] == enabled
