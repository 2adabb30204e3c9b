"""Every role documents its public variables, and the documentation matches defaults/main.yml."""

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec as input_spec

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


# Where each role with input checks hands its variables to them (plugins/module_utils/checks/inputs/, the filter
# rayvllm.fleet.input_problems): playbooks/preflight.yml runs these tasks before any host changes, and every value
# they pass is also checked against the role's argument spec (type, elements, choices: inputs/spec.py).
CHECKS_TASKS = {"firewall": "checks.yml", "preflight": "main.yml"}
CHECKED_ROLES = sorted(
    role for role in ROLES if (ROOT / "roles" / role / "tasks" / CHECKS_TASKS.get(role, "validate.yml")).exists()
)


@pytest.mark.parametrize("role", CHECKED_ROLES)
def test_a_checked_role_hands_its_checks_every_option_of_its_spec(role):
    """A typo in an option that a hand-written list left out (vllm_serving_mode: ray_servee did) passed preflight
    and failed later, after host_prep and the firewall had changed the hosts. The checks' inputs are read from the
    spec itself (the lookup rayvllm.fleet.role_inputs), every option but those NOT_INPUTS gives a reason for."""
    tasks = (ROOT / "roles" / role / "tasks" / CHECKS_TASKS.get(role, "validate.yml")).read_text()
    assert f"lookup('rayvllm.fleet.role_inputs', '{role}')" in tasks, f"roles/{role}: its checks' inputs by hand"
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"].get("options") or {}
    assert input_spec.input_names(role) == [name for name in options if name not in input_spec.NOT_INPUTS]


def test_every_option_left_out_of_the_checks_exists_and_says_why():
    options = {}
    for role in ROLES:
        options.update(load(role, "meta", "argument_specs.yml")["argument_specs"].get("main", {}).get("options") or {})
    assert sorted(set(input_spec.NOT_INPUTS) - set(options)) == []
    assert all(len(why) > 20 for why in input_spec.NOT_INPUTS.values())
