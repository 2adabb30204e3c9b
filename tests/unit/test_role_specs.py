"""Every role documents its public variables, and the documentation matches defaults/main.yml."""

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

# The fleet model's inventory variables describe Ray cluster membership: fleet_facts documents them under
# their ray_ names (the other roles read only its facts).
FLEET_MODEL_INPUTS = {"fleet_facts": {"ray_cluster_name", "ray_node_ip", "ray_node_interface"}}
ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
ALL_ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir() and not p.name.startswith("_"))


def test_every_role_has_argument_specs():
    assert ROLES == ALL_ROLES


def load(role, *parts):
    path = ROOT / "roles" / role / Path(*parts)
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_specs_agree(role):
    defaults = load(role, "defaults", "main.yml")
    options = {}  # every entry point's (a role without tasks/main.yml, such as upgrade, has no main entry point)
    for entry in load(role, "meta", "argument_specs.yml")["argument_specs"].values():
        options.update(entry.get("options") or {})
    assert sorted(set(defaults) - set(options)) == [], "defaults without argument spec"
    for name, spec in options.items():
        assert name.startswith(role + "_") or name in FLEET_MODEL_INPUTS.get(role, ()), (
            f"{name}: public variables are prefixed with the role name"
        )
        assert spec.get("description"), f"{name}: no description"
        if spec.get("required"):
            assert name not in defaults, f"{name}: required but has a default"
        elif "default" in spec or name in defaults:
            assert spec.get("default") == defaults.get(name), f"{name}: spec default differs from defaults/main.yml"
