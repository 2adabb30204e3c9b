"""The fleet_model filter: the inventory's hostvars and groups in, the model with its problems out."""

from ansible_collections.rayvllm.fleet.plugins.filter import fleet_model as f


def hostvars(**hosts):
    base = {"ray_version": "2.60.0", "vllm_version": "0.32.0", "ansible_facts": {}}
    return {name: {**base, **hv} for name, hv in hosts.items()}


def test_the_model_from_hostvars_and_groups_with_the_roles_defaults():
    hv = hostvars(
        h={"ray_node_ip": "10.0.0.1", "vllm_port": 8100, "unrelated": "x"},
        w={"ray_node_ip": "10.0.0.2", "vllm_port": 8100},
    )
    model = f.fleet_model(hv, {"ray_head": ["h"], "ray_workers": ["w"]})
    assert model["problems"] == []
    assert model["clusters"]["default"]["vllm_url"] == "http://10.0.0.1:8100"
    assert model["nodes"]["w"]["settings"]["ray_gcs_port"] == 6379  # the ray role's default
    assert model["addresses"] == {"h": "10.0.0.1", "w": "10.0.0.2"}
    assert model["ports"]["h"]["vllm"] == [8100] and "vllm" not in model["ports"]["w"]


def test_a_secret_reaches_the_model_as_a_digest_only():
    secret = "s3cret-api-key-of-the-cluster"
    hv = hostvars(h={"ray_node_ip": "10.0.0.1", "vllm_api_key": secret})
    model = f.fleet_model(hv, {"ray_head": ["h"]})
    assert secret not in repr(model)


def test_a_secret_that_does_not_render_is_named_not_raised():
    class Unrendered(dict):
        def __getitem__(self, key):
            if key == "vllm_api_key":
                raise RuntimeError("undefined vault variable")
            return super().__getitem__(key)

    hv = {"h": Unrendered(hostvars(h={"ray_node_ip": "10.0.0.1", "vllm_api_key": "x"})["h"])}
    assert f._digest(hv["h"], "vllm_api_key") == "unreadable (RuntimeError)"


def test_the_filters_are_registered():
    assert set(f.FilterModule().filters()) == {"fleet_model", "mixed_within_clusters", "shared_default"}
    assert f.mixed_within_clusters({"a": 1, "b": 2}, {"a": "x", "b": "x"}) == ["cluster 'x': 1 on a; 2 on b"]


def test_shared_default_is_the_owning_roles_literal_default():
    assert f.shared_default("ray_python_interpreter") == "/usr/bin/python3"  # roles/ray/defaults/main.yml
    assert f.shared_default("ray_gcs_port") == 6379
    try:
        f.shared_default("model_path")  # an input of the model without a role default
    except f.AnsibleFilterError as exc:
        assert "model_path" in str(exc)
    else:
        raise AssertionError("an unshared setting must be refused")


def test_the_fleet_facts_variables_are_checked_against_the_roles_argument_spec():
    # Once for every host, in the model's problems (no validate_argument_spec task per host).
    hv = hostvars(h={"ray_node_ip": "10.0.0.1", "ray_cluster_name": ["a", "b"]}, w={"ray_node_ip": "10.0.0.2"})
    problems = f.fleet_model(hv, {"ray_head": ["h"], "ray_workers": ["w"]})["problems"]
    assert problems[0].startswith(
        "ray_cluster_name on h must be a string (roles/fleet_facts/meta/argument_specs.yml), got ['a', 'b'] (a list)"
    )
    assert not any(" on w " in p for p in problems)
