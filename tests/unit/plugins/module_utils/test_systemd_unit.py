"""Values written into systemd units: one argument stays one, nothing adds a line or expands."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.systemd_unit import (
    directive_value,
    exec_arg,
    exit_reason,
    parse_show,
    path_arg,
    private_tmp_conflicts,
    sandboxing,
    unsafe_values,
)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("--port=8000", "--port=8000"),
        ("/srv/models/tiny-llama", "/srv/models/tiny-llama"),
        ("my model", '"my model"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("50%", "50%%"),
        ("%h/x", "%%h/x"),
        ("$HOME", '"$$HOME"'),
        ('--resources={"a": 1}', '"--resources={\\"a\\": 1}"'),
        ("a\\b", '"a\\\\b"'),
        ("", '""'),
    ],
)  # fmt: skip
def test_exec_arg_quotes_and_escapes(value, written):
    assert exec_arg(value) == written


@pytest.mark.parametrize("value", ["tiny\nExecStartPre=+/bin/sh -c id", "a\rb", "a\x00b", "tab\there"])
def test_exec_arg_refuses_control_characters(value):
    with pytest.raises(ValueError, match="contains"):
        exec_arg(value)


def test_unsafe_values_names_the_variable_never_the_value():
    problems = unsafe_values(
        {
            "vllm_served_model_name": "tiny\nExecStartPre=+/bin/sh -c id",
            "vllm_extra_args": ["--ok", "bad\r"],
            "vllm_environment": {"HF_HOME": "/ok", "X": "sec\nret"},
            "vllm_api_key": "secret\n",
            "vllm_port": 8000,
            "fine": "plain value with % and $",
        }
    )
    assert problems == [
        "vllm_served_model_name (contains a newline)",
        "vllm_extra_args[1] (contains a carriage return)",
        "vllm_environment.X (contains a newline)",
        "vllm_api_key (contains a newline)",
    ]
    assert not any("secret" in p or "ExecStartPre" in p for p in problems)


def test_unsafe_values_checks_mapping_keys():
    assert unsafe_values({"ray_environment": {"A\nB": "1"}}) == ["ray_environment.A?B (contains a newline)"]


@pytest.mark.parametrize(
    ("value", "written"),
    [("/var/lib/ray", "/var/lib/ray"), ("/srv/100%", "/srv/100%%"), ("/srv/$x", "/srv/$x"), ("/srv/a b", '"/srv/a b"')],
)
def test_path_arg_doubles_only_percent(value, written):
    assert path_arg(value) == written


@pytest.mark.parametrize(
    ("value", "written"),
    [("ray", "ray"), ("/srv/100%i", "/srv/100%%i"), ("/srv/$x y", "/srv/$x y")],
)
def test_directive_value_doubles_only_percent(value, written):
    assert directive_value(value) == written


def test_directive_value_refuses_a_newline():
    with pytest.raises(ValueError, match="a newline"):
        directive_value("ray\nExecStartPre=+/bin/sh")


def test_exit_reason_from_systemctl_show():
    running = parse_show("ActiveState=active\nSubState=running\nNRestarts=3\nExecMainStatus=0\nResult=success\n")
    assert running["NRestarts"] == "3"
    assert exit_reason("vllm.service", running, running) is None
    restarting = dict(running, ActiveState="activating", SubState="auto-restart", NRestarts="4", ExecMainStatus="2",
                      Result="exit-code")  # fmt: skip
    assert exit_reason("vllm.service", running, restarting) == "vllm.service exited and systemd restarted it 1 time(s)"
    failed = dict(running, ActiveState="failed", ExecMainStatus="1", Result="exit-code")
    assert exit_reason("vllm.service", running, failed) == "vllm.service failed (exit status 1, result exit-code)"
    stopped = dict(running, ActiveState="inactive", SubState="dead")
    assert exit_reason("vllm.service", running, stopped).startswith("vllm.service is not running")


@pytest.mark.parametrize("setting", ["yes", True, "true", "on", "1", "Disconnected"])
def test_private_tmp_hides_directories_under_tmp(setting):
    dirs = {"ray_temp_dir": "/tmp/ray", "VLLM_RPC_BASE_PATH": "/var/tmp", "data": "/var/lib/ray/tmp", "x": "/tmpfoo"}
    assert private_tmp_conflicts({"PrivateTmp": setting}, dirs) == ["ray_temp_dir", "VLLM_RPC_BASE_PATH"]


@pytest.mark.parametrize("setting", ["", "no", False, "false", "off", "0", None])
def test_without_private_tmp_nothing_is_hidden(setting):
    assert private_tmp_conflicts({"PrivateTmp": setting}, {"ray_temp_dir": "/tmp/ray"}) == []
    assert private_tmp_conflicts({}, {"ray_temp_dir": "/tmp/ray"}) == []


HARDENING = {"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes"}


def test_sandboxing_writes_each_setting_sorted_then_the_writable_paths_once():
    assert sandboxing(HARDENING, ["/var/lib/ray", "/var/lib/ray/tmp", "/var/lib/ray", ""]) == [
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/ray /var/lib/ray/tmp",
    ]


def test_sandboxing_an_empty_value_drops_the_setting_and_without_protectsystem_no_readwritepaths():
    assert sandboxing({**HARDENING, "ProtectSystem": "", "PrivateTmp": None}, ["/var/lib/ray"]) == [
        "NoNewPrivileges=yes"
    ]
    assert sandboxing({}, ["/x"]) == [] and sandboxing(None) == []


def test_sandboxing_writes_booleans_as_systemd_does_and_refuses_a_key_that_is_no_name():
    assert sandboxing({"PrivateTmp": True, "PrivateDevices": False}) == ["PrivateDevices=no", "PrivateTmp=yes"]
    with pytest.raises(ValueError, match="not a systemd directive"):
        sandboxing({1: "yes", "PrivateTmp": "yes"})


def test_sandboxing_quotes_and_escapes_paths():
    assert sandboxing({"ProtectSystem": "strict"}, ["/srv/my data", "/srv/100%"])[-1] == (
        'ReadWritePaths="/srv/my data" /srv/100%%'
    )


@pytest.mark.parametrize(
    "hardening",
    [
        {"ProtectSystem": "strict\nExecStartPre=+/bin/sh"},
        {"Protect\nSystem": "strict"},
        {"ExecStartPre=+/bin/sh #": "x"},
    ],
)
def test_sandboxing_refuses_what_would_add_a_line_or_a_directive(hardening):
    with pytest.raises(ValueError, match="not a systemd directive"):
        sandboxing(hardening)
