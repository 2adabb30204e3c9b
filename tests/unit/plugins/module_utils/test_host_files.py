"""host_files: a role's directories, files and links compared and put in place in one call."""

import os
import subprocess

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import host_files as hf


def test_a_missing_directory_is_created_with_its_mode(tmp_path):
    item = {"path": str(tmp_path / "a" / "b"), "mode": "0750", "owner": "0", "group": "0"}
    assert hf.directory_changes(item) == ["created"]
    hf.apply_directory(item)
    assert oct(os.stat(item["path"]).st_mode & 0o777) == "0o750"
    assert hf.directory_changes(item) == []
    os.chmod(item["path"], 0o755)
    assert hf.directory_changes(item) == ["mode"]


def test_a_file_is_written_once_and_then_left_alone(tmp_path):
    item = {"path": str(tmp_path / "ray.env"), "content": "A=1\n", "mode": "0640"}
    assert hf.file_changes(item) == ["created"]
    hf.apply_file(item, ["created"])
    assert (tmp_path / "ray.env").read_text() == "A=1\n"
    assert oct(os.stat(item["path"]).st_mode & 0o777) == "0o640"
    assert hf.file_changes(item) == []
    changed = dict(item, content="A=2\n")
    assert hf.file_changes(changed) == ["content"]
    assert hf.diff_entry(changed)["before"] == "A=1\n" and hf.diff_entry(changed)["after"] == "A=2\n"
    assert hf.diff_entry(dict(changed, diff=False))["after"] == "(content not shown)\n"


def test_a_file_the_validator_refuses_leaves_the_old_one(tmp_path):
    path = tmp_path / "rules.nft"
    path.write_text("old\n")
    item = {"path": str(path), "content": "new\n", "validate": "false %s"}
    with pytest.raises(hf.FilesError, match="refused the new .*the old file is unchanged"):
        hf.apply_file(item, ["content"])
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rules.nft"]  # no temporary file left

    seen = []

    def run(argv, **kwargs):
        seen.append(open(argv[-1]).read())
        return subprocess.CompletedProcess(argv, 0, "", "")

    hf.apply_file(dict(item, validate="check -f %s"), ["content"], run=run)
    assert seen == ["new\n"] and path.read_text() == "new\n"


def test_links_point_where_they_should(tmp_path):
    link = tmp_path / "current"
    item = {"path": str(link), "src": "/opt/ray/2.60.0"}
    assert hf.link_changes(item) == ["created"]
    hf.apply_link(item)
    assert os.readlink(link) == "/opt/ray/2.60.0" and hf.link_changes(item) == []
    assert hf.link_changes(dict(item, src="/opt/ray/2.59.0")) == ["target"]
    (tmp_path / "dir").mkdir()
    with pytest.raises(hf.FilesError, match="is not a link"):
        hf.link_changes({"path": str(tmp_path / "dir"), "src": "/x"})


def test_unknown_owner_and_bad_mode_are_named(tmp_path):
    with pytest.raises(hf.FilesError, match="no user named nobody-here"):
        hf.directory_changes({"path": str(tmp_path), "owner": "nobody-here"})
    with pytest.raises(hf.FilesError, match="mode '0x9' is not an octal number"):
        hf.directory_changes({"path": str(tmp_path), "mode": "0x9"})
