"""The model role's path checks: a model_path the role would move, link or remove is a model's own directory."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import model as inputs

SETTINGS = {
    "ray_install_root": "/opt/ray",
    "vllm_install_root": "/opt/vllm",
    "ray_config_dir": "/etc/ray",
    "vllm_config_dir": "/etc/vllm",
    "ray_temp_dir": "/var/lib/ray/tmp",
}
MODEL = {"nodes": {"gpu-1": {"cluster": "default", "settings": dict(SETTINGS, model_path="/srv/models/llama")}}}


def problems(path, source="hf", state=None):
    values = {"model_path": path, "model_source": source, "model_controller_path": "", "model_hf_repo": "x"}
    context = {"probe": {"paths": {path: state}}} if state is not None else {}
    return [p for p in inputs.problems(values, "gpu-1", MODEL, context) if "model_path" in p]


@pytest.mark.parametrize("path", ["/", "/opt", "/srv", "/usr", "/var", "/home", "/srv/models", "/var/lib"])
def test_a_system_directory_is_refused(path):
    (problem,) = [p for p in problems(path, source="shared") if "a system directory" in p]
    assert f"model_path on gpu-1 is {path}, a system directory" in problem
    assert "e.g. /srv/models/<name>" in problem


@pytest.mark.parametrize(
    "path, normal",
    [
        ("/srv/models/../../opt", "/opt"),
        ("/srv/models/llama/", "/srv/models/llama"),
        ("/srv//models/./l", "/srv/models/l"),
    ],
)
def test_a_path_not_written_normalised_is_refused_naming_what_it_resolves_to(path, normal):
    found = problems(path, source="shared")
    assert f"model_path on gpu-1 is '{path}': write it normalised" in found[0] and f"resolves to {normal}" in found[0]


@pytest.mark.parametrize(
    "path, relation, name",
    [
        ("/opt/vllm", "is", "vllm_install_root"),
        ("/opt/vllm/models/llama", "is inside", "vllm_install_root"),
        ("/etc/ray/model", "is inside", "ray_config_dir"),
        ("/var/lib/ray", "holds", "ray_temp_dir"),
    ],
)
def test_the_roles_own_directories_and_their_parents_are_refused(path, relation, name):
    found = problems(path, source="shared")
    assert any(f"model_path {path} on gpu-1 {relation} {name}=" in p for p in found), found


def test_a_real_directory_without_config_json_is_refused_where_the_role_would_move_it():
    not_weights = {"exists": True, "link": False, "dir": True, "config": False, "real": "/srv/models/llama"}
    (problem,) = problems("/srv/models/llama", state=not_weights)
    assert "model_path /srv/models/llama on gpu-1 is a directory that holds no config.json" in problem
    # Weights staged before revisions (config.json), a link to a revision, nothing yet: all fine.
    assert problems("/srv/models/llama", state=dict(not_weights, config=True)) == []
    assert problems("/srv/models/llama", state=dict(not_weights, link=True)) == []
    assert problems("/srv/models/llama", state={"exists": False, "link": False, "dir": False, "config": False}) == []
    # model_source: shared is never moved (the weights are the shared filesystem's).
    assert problems("/srv/models/llama", source="shared", state=not_weights) == []


def test_a_model_directory_of_its_own_passes():
    assert problems("/srv/models/llama") == []
    assert problems("/data/models/llama-3.1-70b", source="shared") == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"model_source": "s3"}, ["model_source on gpu-1 is 's3': give one of hf"]),
        ({"model_path": "models/x"}, ["model_path on gpu-1 is 'models/x': not an absolute directory"]),
        ({"model_path": "<unset>"}, ["model_path on gpu-1 is unset: not an absolute directory"]),
        (
            {"model_source": "hf", "model_hf_repo": "", "model_hf_revision": "0" * 40},
            ["model_source=hf on gpu-1 needs model_hf_repo"],
        ),
        ({"model_source": "controller"}, ["model_source=controller on gpu-1 needs model_controller_path"]),
    ],
)
def test_each_unusable_model_setting_is_named_alone(values, expected):
    """Only what is wrong is named (a single message used to list every requirement: model_source s3 was reported
    as 'model_path must be an absolute directory (got /srv/models/example), model_source one of ...')."""
    settings = {"model_path": "/srv/models/llama", "model_source": "shared", "model_controller_path": "",
                "model_hf_repo": "org/name", **values}  # fmt: skip
    found = inputs.problems(settings, "gpu-1", MODEL, {})
    assert [p[: len(e)] for p, e in zip(found, expected, strict=False)] == expected and len(found) == len(expected), (
        found
    )
