"""The systemd filters: values written into units, and the sandboxing baseline every role starts from."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.rayvllm.fleet.plugins.filter import systemd_unit as f

# What the roles' *_systemd_hardening defaults were, literally, before the baseline was written once: the units
# rendered from the defaults must stay byte for byte the same (no restart on upgrade).
GPU_SERVICES = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
}
NO_DEVICES = {**GPU_SERVICES, "PrivateDevices": "yes"}
NO_JIT = {**NO_DEVICES, "MemoryDenyWriteExecute": "yes"}


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({}, GPU_SERVICES),  # ray, vllm
        ({"PrivateDevices": "yes"}, NO_DEVICES),  # router, vllm_watchdog
        ({"PrivateDevices": "yes", "MemoryDenyWriteExecute": "yes"}, NO_JIT),  # prometheus, alertmanager
    ],
)
def test_the_baseline_with_a_services_additions_is_what_the_roles_wrote_before(overrides, expected):
    assert f.systemd_hardening(overrides) == expected
    assert f.systemd_sandboxing(f.systemd_hardening(overrides), ["/var/lib/x"]) == f.systemd_sandboxing(
        expected, ["/var/lib/x"]
    )


def test_an_override_replaces_or_drops_a_directive_and_keeps_the_rest():
    hardening = f.systemd_hardening({"ProtectHome": "read-only", "PrivateTmp": ""})
    lines = f.systemd_sandboxing(hardening).splitlines()
    assert "ProtectHome=read-only" in lines and not any(line.startswith("PrivateTmp=") for line in lines)
    assert "NoNewPrivileges=yes" in lines


def test_errors_are_filter_errors_naming_the_filter():
    with pytest.raises(AnsibleFilterError, match="systemd_hardening: the sandboxing overrides must be a mapping"):
        f.systemd_hardening(["PrivateDevices"])
    with pytest.raises(AnsibleFilterError, match="systemd_exec_arg: .* contains a newline"):
        f.systemd_exec_arg("a\nb")
    with pytest.raises(AnsibleFilterError, match="systemd_sandboxing"):
        f.systemd_sandboxing({"Bad Key": "yes"})


def test_problems_are_lists_not_errors():
    assert f.unit_value_problems({"x": ["ok", "a\nb"]}) == ["x[1] (contains a newline)"]
    assert f.private_tmp_problems({"PrivateTmp": "yes"}, {"ray_temp_dir": "/tmp/ray"}) == ["ray_temp_dir"]
    assert f.systemd_path_arg("/a b") == '"/a b"' and f.systemd_value("50%") == "50%%"
