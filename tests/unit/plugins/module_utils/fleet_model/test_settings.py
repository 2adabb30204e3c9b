"""The settings the fleet model shares across hosts: literal defaults of their owning roles."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import resolve

from .inventory import DEFAULTS


def test_shared_defaults_are_literals_in_their_roles():
    assert DEFAULTS["ray_gcs_port"] == 6379 and DEFAULTS["vllm_port"] == 8000
    with pytest.raises(ValueError, match="must be a literal"):
        fm.literal_defaults({"ray": {**{k: 1 for k in fm.SHARED_SETTINGS["ray"]}, "ray_user": "{{ x }}"}})
    with pytest.raises(ValueError, match="not declared in roles/vllm/defaults/main.yml"):
        fm.literal_defaults({"ray": {k: 1 for k in fm.SHARED_SETTINGS["ray"]}})


def test_settings_are_resolved_once_for_every_host_of_the_fleet():
    settings = resolve({"a": {"vars": {"vllm_port": 8100}}, "m": {}}, DEFAULTS, ["a", "m"])
    assert settings["a"]["vllm_port"] == 8100 and settings["m"]["vllm_port"] == 8000
    assert settings["m"]["grafana_http_port"] == 3000 and settings["m"]["ray_cluster_name"] is None
