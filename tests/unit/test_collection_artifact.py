"""The built collection holds the collection, not the repository's inventories, sandbox, tests or tooling."""

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
    assert top == {"CHANGELOG.md", "FILES.json", "MANIFEST.json", "README.md", "meta", "playbooks", "plugins", "roles"}
    assert "playbooks/site.yml" in names and "roles/fleet_facts/tasks/main.yml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
