"""A role's checks receive every option of its argument spec, each as the host sees it; an unset one, or one whose
value names a variable that is not set, is '<unset>' (the role's checks say which must be set)."""

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.rayvllm.fleet.plugins.lookup.role_inputs import LookupModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec


def inputs(role, variables):
    lookup = LookupModule(loader=DataLoader(), templar=Templar(loader=DataLoader(), variables=variables))
    (values,) = lookup.run([role], variables=variables)
    return values


def test_every_option_of_the_spec_but_the_ones_left_out_with_its_templated_value():
    variables = {"model_path": "/srv/models/m", "model_revisions_dir": trust_as_template("{{ model_path }}.revisions")}
    values = inputs("model", variables)
    assert list(values) == spec.input_names("model")
    assert "model_host_probe" not in values and "model_hf_token" not in values  # NOT_INPUTS
    assert values["model_path"] == "/srv/models/m"
    assert values["model_revisions_dir"] == "/srv/models/m.revisions"
    assert values["model_owner"] == spec.UNSET  # not in these variables (a play has the role's defaults)


def test_a_value_that_names_an_unset_variable_is_unset_not_an_error():
    values = inputs("model", {"model_revisions_dir": trust_as_template("{{ model_path }}.revisions")})
    assert values["model_path"] == values["model_revisions_dir"] == spec.UNSET


def test_unset_is_no_type_problem_the_role_checks_name_what_must_be_set():
    assert spec.problems("model", {"model_size_gib": spec.UNSET, "model_distribution_port": "x"}, "h") == [
        "model_distribution_port on h must be a whole number (roles/model/meta/argument_specs.yml), got 'x' (a "
        "string): correct it in the inventory, or remove it for the role's default."
    ]


@pytest.mark.parametrize("terms", [[], ["model", "ray"], ["no_such_role"]])
def test_one_known_role_at_a_time(terms):
    with pytest.raises(AnsibleLookupError):
        inputs_of = LookupModule(loader=DataLoader(), templar=Templar(loader=DataLoader(), variables={}))
        inputs_of.run(terms, variables={})
