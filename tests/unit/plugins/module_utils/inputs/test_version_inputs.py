"""ray_version and vllm_version must be exact X.Y.Z releases (the integration tests prove, with one case, that
preflight stops on an unpinned one)."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs import ray, vllm

from .roles import role_defaults


def version_problems(module, role, key, version):
    values = role_defaults(role, **{key: version})
    return [p for p in module.problems(values, "node-a", {}, {}) if p.startswith(key + " must be an exact")]


@pytest.mark.parametrize("version", ["latest", ">=2.50", "2.60", "2.60.0.post1", None, 2.6, ["2.60.0"]])
def test_an_unpinned_ray_version_is_refused_naming_the_host_and_an_example(version):
    (problem,) = version_problems(ray, "ray", "ray_version", version)
    assert "on node-a" in problem and 'e.g. ray_version: "2.60.0"' in problem


@pytest.mark.parametrize("version", ["latest", "0.32", None])
def test_an_unpinned_vllm_version_is_refused(version):
    (problem,) = version_problems(vllm, "vllm", "vllm_version", version)
    assert "on node-a" in problem


def test_exact_releases_pass():
    assert version_problems(ray, "ray", "ray_version", "2.60.0") == []
    assert version_problems(vllm, "vllm", "vllm_version", "0.32.0") == []
