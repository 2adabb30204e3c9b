"""The router role's input checks for the front door: its body limit, the tenants (checked against the models the
fleet model's door serves, a key left out standing for a generated one), and whether cluster keys pass."""

from pathlib import Path

import pytest
import yaml

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import router as router_inputs

ROOT = Path(__file__).resolve().parents[5]
DEFAULTS = yaml.safe_load((ROOT / "roles/router/defaults/main.yml").read_text())
MODEL = {"routers": {"door": {"models": ["tiny-chat", "tiny-llama"]}}}


def problems(**values):
    return router_inputs.problems(dict(DEFAULTS, **values), "r1", MODEL, {})


def test_the_defaults_pass():
    assert problems() == []


def test_tenants_without_keys_pass_their_keys_are_generated():
    assert problems(router_tenants=[{"name": "team-a"}, {"name": "team-b", "models": ["tiny-chat"]}]) == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"router_door_max_body_bytes": 100}, "router on r1: router_door_max_body_bytes is 100"),
        ({"router_door_cluster_keys": "no"}, "router on r1: router_door_cluster_keys is no: true"),
        ({"router_tenants": [{"name": "team-a", "models": ["tiny-lama"]}]},
         "router on r1: tenant team-a (router_tenants[0]): the model 'tiny-lama' is not served by the fleet"),
        ({"router_tenants": [{"name": "team-a", "key": "short-key"}]},
         "router on r1: tenant team-a (router_tenants[0]): its key is not usable (the value is not shown)"),
    ],
)  # fmt: skip
def test_each_unusable_door_setting_is_named(values, expected):
    found = problems(**values)
    assert any(p.startswith(expected) for p in found), found
    assert not any("short-key" in p for p in found)
