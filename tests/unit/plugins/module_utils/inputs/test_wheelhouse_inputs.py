"""<role>_wheelhouse_source: a directory of wheels on the controller, or nothing; never beside <role>_wheelhouse_dir.
The ray, vllm and router roles check it alike (inputs/common.py)."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import ray, router, vllm

from .roles import role_defaults

ROLES = [(ray, "ray"), (vllm, "vllm"), (router, "router")]


def wheelhouse_problems(module, role, **settings):
    values = role_defaults(role, ray_version="2.60.0", vllm_version="0.32.0", **settings)
    return [p for p in module.problems(values, "node-a", {}, {}) if "_wheelhouse_" in p]


@pytest.mark.parametrize("module,role", ROLES)
def test_a_directory_of_wheels_on_the_controller_passes_and_none_is_fine(module, role, tmp_path):
    (tmp_path / "ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    assert wheelhouse_problems(module, role, **{role + "_wheelhouse_source": str(tmp_path)}) == []
    assert wheelhouse_problems(module, role) == []


@pytest.mark.parametrize("module,role", ROLES)
def test_both_a_source_and_a_host_directory_are_refused_naming_both(module, role, tmp_path):
    (tmp_path / "x-1-py3-none-any.whl").write_bytes(b"")
    settings = {role + "_wheelhouse_source": str(tmp_path), role + "_wheelhouse_dir": "/srv/wheels"}
    (problem,) = wheelhouse_problems(module, role, **settings)
    assert problem.startswith(
        "%s_wheelhouse_source=%s and %s_wheelhouse_dir=/srv/wheels are both set on node-a" % (role, tmp_path, role)
    )
    assert problem.endswith("Set one of them.")


def test_a_missing_directory_and_one_without_wheels_are_told_apart(tmp_path):
    (tmp_path / "README").write_text("not a wheel\n")
    (empty,) = wheelhouse_problems(ray, "ray", ray_wheelhouse_source=str(tmp_path))
    assert "is a directory without a wheel (*.whl) on the controller" in empty
    (missing,) = wheelhouse_problems(vllm, "vllm", vllm_wheelhouse_source=str(tmp_path / "nowhere"))
    assert (
        "vllm_wheelhouse_source=%s on node-a is not a directory on the controller" % (tmp_path / "nowhere") in missing
    )
    assert "pip download --dest DIR" in missing
