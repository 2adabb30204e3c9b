"""A wheelhouse on the controller brought to the hosts (python_venv_wheelhouse_source, the python_venv role as the
ray and vllm roles call it), on hosts of this machine: it leaves the controller once, the other hosts fetch it from
peers, every venv installs from it with no index, a re-run moves nothing, and a changed wheelhouse is a new one that
replaces the old without installing the built venvs again."""

import base64
import hashlib
import sys
import zipfile

from conftest import local_hosts
from test_model_role import task_block

NAMES = ["node-a", "node-b", "node-c"]


def wheel(directory, name, version):
    """A pure-Python wheel of one module ``name`` (``VERSION = version``), written by hand."""
    files = {
        f"{name}.py": f'VERSION = "{version}"\n',
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{path},sha256={digest},{len(text.encode())}")
    lines.append(f"{record},,")
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for inner, text in files.items():
            archive.writestr(inner, text)
        archive.writestr(record, "\n".join(lines) + "\n")
    return path


def setup(tmp_path):
    source = tmp_path / "controller-wheels"
    source.mkdir()
    wheel(source, "tinypkg", "1.0")
    (source / "padding-0.1-py3-none-any.whl").write_bytes(b"\0" * 400000)  # never installed: only carried
    playbook = tmp_path / "venv.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [rayvllm.fleet.fleet_facts]\n  tasks:\n"
        "    - name: venv\n      ansible.builtin.include_role: {name: rayvllm.fleet.python_venv}\n"
        "      vars:\n"
        "        python_venv_path: '{{ node_root }}/venv'\n"
        f"        python_venv_interpreter: {sys.executable}\n"
        "        python_venv_installer: pip\n"
        "        python_venv_requirements: [tinypkg==1.0]\n"
        f"        python_venv_wheelhouse_source: {source}\n"
        "        python_venv_wheelhouse_root: '{{ node_root }}/wheelhouse'\n"
        "        python_venv_wheelhouse_peers: true\n"
    )
    hosts = local_hosts(
        head=NAMES[:1], workers=NAMES[1:], **{name: {"node_root": str(tmp_path / name)} for name in NAMES}
    )
    return source, str(playbook), hosts


def wheelhouse(tmp_path, name):
    current = tmp_path / name / "wheelhouse/current"
    return {p.name: p.read_bytes() for p in current.iterdir() if p.suffix == ".whl"} if current.is_symlink() else None


def test_the_wheels_leave_the_controller_once_and_every_venv_installs_from_them(run_preflight, tmp_path):
    source, playbook, hosts = setup(tmp_path)
    rc, out = run_preflight(hosts, {}, playbook=playbook)
    assert rc == 0, out[-4000:]
    copied = task_block(out, "copy the wheels from the controller")
    assert "changed: [node-a]" in copied and "changed: [node-b]" not in copied and "changed: [node-c]" not in copied
    assert "node-c: fetching the wheels of wheelhouse from node-b, then node-a" in out
    expected = {p.name: p.read_bytes() for p in source.iterdir()}
    for name in NAMES:
        assert wheelhouse(tmp_path, name) == expected, name
        [module] = (tmp_path / name / "venv/lib").glob("*/site-packages/tinypkg.py")
        assert module.read_text() == 'VERSION = "1.0"\n', name
    rc, again = run_preflight(hosts, {}, playbook=playbook)
    assert rc == 0 and "changed=0" in again, again[-4000:]
    assert "fetching the wheels" not in again
    # A new wheel on the controller: a new wheelhouse, spread the same way; the old one removed; the venv, whose
    # requirement did not change, is not installed again.
    wheel(source, "otherpkg", "2.0")
    rc, out = run_preflight(hosts, {}, playbook=playbook)
    assert rc == 0, out[-4000:]
    assert "node-c: fetching the wheels of wheelhouse from node-b, then node-a" in out
    for name in NAMES:
        assert "otherpkg-2.0-py3-none-any.whl" in wheelhouse(tmp_path, name)
        kept = [p.name for p in (tmp_path / name / "wheelhouse").iterdir()]
        assert len(kept) == 2 and "current" in kept, kept
    assert "changed: [node-a]" not in task_block(out, "holds tinypkg==1.0")


def test_a_source_without_wheels_is_refused_naming_the_variable(run_preflight, tmp_path):
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    rc, out = run_preflight(local_hosts(head=("node-a",), workers=()), {"ray_wheelhouse_source": str(empty)})
    assert rc != 0
    text = " ".join(out.split())
    assert f"ray_wheelhouse_source={empty} on node-a is a directory without a wheel (*.whl) on the controller" in text
