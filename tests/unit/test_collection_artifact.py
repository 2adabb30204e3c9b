"""The built collection holds the collection and its documentation and changelog, not the repository's inventories,
sandbox, tests or tooling, nor the changelog's unreleased fragments."""

import subprocess
import sys
import tarfile
from pathlib import Path

from conftest import ROOT


def test_artifact_contents(tmp_path):
    galaxy = Path(sys.executable).with_name("ansible-galaxy")
    subprocess.run(
        [str(galaxy), "collection", "build", "--force", "--output-path", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (artifact,) = tmp_path.glob("rayvllm-fleet-*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    top = {n.split("/")[0] for n in names}
    assert top == {
        "CHANGELOG.rst", "FILES.json", "MANIFEST.json", "README.md", "changelogs", "docs", "meta", "playbooks",
        "plugins", "roles",
    }  # fmt: skip
    assert "playbooks/site.yml" in names and "roles/fleet_facts/tasks/main.yml" in names
    assert "changelogs/changelog.yaml" in names and "docs/variables.md" in names
    assert not [n for n in names if n.startswith("changelogs/fragments")]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
