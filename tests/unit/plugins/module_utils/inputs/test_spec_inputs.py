"""Issue 30: each value a role's checks receive is checked against the role's meta/argument_specs.yml in preflight
(inputs/spec.py), so a value of the wrong type is refused before any host changes, not when its role starts."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import inputs
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import spec

from .roles import role_defaults
from .test_inputs_never_raise import DEFAULTS, MODEL


def literal(values):
    """The values that are not templates (a default such as "{{ fleet_node.settings.x }}" is resolved by Ansible)."""
    return {k: v for k, v in values.items() if not (isinstance(v, str) and "{{" in v)}


@pytest.mark.parametrize(
    "role, name, value, expected, got",
    [
        # A string where a list is expected: Ansible's validator splits it on commas, the role's loop took it letter
        # by letter (uv pip uninstall t o r c h ...).
        ("vllm", "vllm_pip_remove", "torchvision", "must be a list of strings", "got 'torchvision' (a string)"),
        ("vllm", "vllm_allow_cross_node_tp", "maybe", "must be true or false", "got 'maybe' (a string)"),
        ("grafana", "grafana_http_port", "four", "must be a whole number", "got 'four' (a string)"),
        ("grafana", "grafana_http_port", True, "must be a whole number", "got true (a boolean)"),
        ("grafana", "grafana_anonymous_org_role", ["Viewer"], "must be a string", "got ['Viewer'] (a list)"),
        ("alertmanager", "alertmanager_global", "resolve_timeout=5m", "must be a mapping", "(a string)"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_with_the_host_the_value_and_the_fix(role, name, value, expected, got):
    found = inputs.problems(role, dict(DEFAULTS[role], **{name: value}), "gpu-1", MODEL, {})
    mine = [p for p in found if p.startswith(name + " on gpu-1 ")]
    assert len(mine) == 1, found
    assert expected in mine[0] and got in mine[0] and "roles/%s/meta/argument_specs.yml" % role in mine[0]
    assert "correct it in the inventory, or remove it for the role's default" in mine[0]


def test_what_ansible_converts_without_harm_passes_and_choices_are_checked():
    assert spec.problems("grafana", {"grafana_http_port": "3000", "grafana_anonymous_enabled": "yes"}, "m") == []
    assert spec.problems("grafana", {"grafana_version": 11}, "m") == []  # a number where a string is expected
    [choice] = spec.problems("grafana", {"grafana_install_source": "docker"}, "m")
    assert "grafana_install_source on m must be a string, one of " in choice and "got 'docker'" in choice


def test_a_secret_is_never_shown_and_a_variable_is_named_once():
    [secret] = spec.problems("grafana", {"grafana_admin_password": ["s3cret-value"]}, "m")
    assert "s3cret" not in secret and "got a list" in secret
    named = ["grafana_http_port on m is refused by the role's own check"]
    assert spec.problems("grafana", {"grafana_http_port": "four"}, "m", named) == []


@pytest.mark.parametrize("role", sorted({module for module, _function in inputs.ROLES.values()}))
def test_every_role_default_passes_its_own_spec(role):
    values = literal(role_defaults(role))
    assert spec.problems(role, values, "h") == []


@pytest.mark.parametrize("role", ["host_prep", "node_exporter", "dcgm_exporter"])
def test_the_roles_without_input_checks_are_checked_by_preflight_on_every_host(role):
    """host_prep, node_exporter and dcgm_exporter have no validate task: preflight checks the inventory's values for
    them on every host (monitoring hosts too), against their specs; their own defaults pass."""
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.preflight import OTHER_ROLES

    assert role in OTHER_ROLES
    defaults = literal(role_defaults(role))
    assert spec.problems(role, defaults, "h") == []
    name = next(n for n, s in spec.role_options(role).items() if s.get("type") == "int")
    usual = literal(DEFAULTS["preflight"])
    for host in ("gpu-1", "mon-1"):
        found = inputs.problems("preflight", usual, host, MODEL, {"role_values": {name: "four"}})
        assert [p for p in found if p.startswith("%s on %s must be a whole number" % (name, host))], found
    assert inputs.problems("preflight", usual, "mon-1", MODEL, {"role_values": {name: 9}}) == []


@pytest.mark.parametrize(
    "role, name",
    [
        ("alertmanager", "alertmanager_storage_path"),
        ("alertmanager", "alertmanager_config_file"),
        ("grafana", "grafana_dashboards_dir"),
        ("prometheus", "prometheus_data_dir"),
        ("router", "router_state_dir"),
        ("router", "router_textfile_dir"),
        ("vllm_watchdog", "vllm_watchdog_environment_file"),
        ("model", "model_revisions_dir"),
        ("ray", "ray_data_dir"),
        ("vllm", "vllm_config_dir"),
    ],
)
def test_a_relative_or_unnormalised_directory_a_role_writes_is_refused(role, name):
    """A relative path would be created under the task's working directory and written into the units as given."""
    base = dict(DEFAULTS[role], model_path="/srv/models/m") if role == "model" else DEFAULTS[role]
    for value, why, fix in (
        ("var/lib/x", "not an absolute path", "Give a path from /"),
        ("/var/lib/../lib/x", "not written as the path it resolves to (/var/lib/x)", "Write it without '..'"),
    ):
        found = inputs.problems(role, dict(base, **{name: value}), "gpu-1", MODEL, {})
        mine = [p for p in found if p.startswith(name + " on gpu-1 ")]
        assert len(mine) == 1 and why in mine[0] and fix in mine[0], found
    absolute = inputs.problems(role, dict(base, **{name: "/var/lib/x"}), "gpu-1", MODEL, {})
    assert not [p for p in absolute if p.startswith(name + " on ")], absolute


@pytest.mark.parametrize("name", ["router_textfile_dir", "vllm_watchdog_textfile_dir"])
def test_an_empty_textfile_dir_means_no_metrics_file_and_passes(name):
    role = name.rsplit("_textfile_dir", 1)[0]
    found = inputs.problems(role, dict(DEFAULTS[role], **{name: ""}), "gpu-1", MODEL, {})
    assert not [p for p in found if p.startswith(name + " on ")], found


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("ray_serve_proxy_location", "everywhere", "not one of HeadOnly, EveryNode"),
        ("ray_serve_http_port", 70000, "not a port number"),
        ("ray_serve_ingress_replicas", 0, "not a whole number of at least 1"),
        ("ray_serve_max_surge_percent", 150, "is 150: more than 100"),
        ("ray_serve_app_name", "my app", "not an application name"),
        ("ray_serve_environment", {"VLLM_API_KEY": "x"}, "sets VLLM_API_KEY: the role sets"),
        ("ray_serve_ingress_dir", "ingress", "not an absolute path"),
        ("ray_serve_apply_timeout", "soon", "must be a whole number"),
    ],
)
def test_each_unusable_ray_serve_setting_has_its_own_message(name, value, message):
    """The role's settings were one assert whose message listed every requirement, the fine ones included."""
    usual = literal(DEFAULTS["ray_serve"])
    usual["ray_serve_http_port"] = 8000
    assert inputs.problems("ray_serve", usual, "gpu-1", MODEL, {}) == []
    found = inputs.problems("ray_serve", dict(usual, **{name: value}), "gpu-1", MODEL, {})
    assert len(found) == 1 and found[0].startswith(name + " on gpu-1 ") and message in found[0], found


def test_a_value_is_left_to_the_role_checks_only_where_they_name_that_very_variable():
    """A message about ray_serve_api_key_file does not name ray_serve_api_key: a wrongly typed key is still named."""
    values = {"ray_serve_api_key": False, "ray_serve_api_key_file": "relative/path"}
    named = ["ray_serve_api_key_file on gpu-1 must be an absolute path"]
    found = spec.problems("ray_serve", values, "gpu-1", named)
    assert [p.split(" must ")[0] for p in found] == ["ray_serve_api_key on gpu-1"], found
    # Named as a whole word, it is left to the role's message.
    assert spec.problems("ray_serve", values, "gpu-1", named + ["ray_serve_api_key on gpu-1 is wrong"]) == []
