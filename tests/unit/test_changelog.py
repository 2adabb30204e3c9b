"""The changelog (antsibull-changelog: changelogs/fragments, changelogs/changelog.yaml, CHANGELOG.rst) lints and is
generated from changelog.yaml, and the version galaxy.yml declares is the unreleased one the README names."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
RELEASES = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())["releases"]


def _version(text):
    return tuple(int(part) for part in text.split("."))


def antsibull_changelog(*args, cwd=ROOT):
    pytest.importorskip("antsibull_changelog", reason="antsibull-changelog is in requirements.lock: rebuild .venv")
    command = Path(sys.executable).with_name("antsibull-changelog")
    return subprocess.run([str(command), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_galaxy_declares_the_unreleased_version_after_every_release():
    assert GALAXY["version"] not in RELEASES, "galaxy.yml's version is released: start the next one"
    assert all(_version(GALAXY["version"]) > _version(v) for v in RELEASES)


def test_the_readme_names_galaxys_version():
    found = re.findall(r"Version (\d+\.\d+\.\d+)", (ROOT / "README.md").read_text())
    assert found == [GALAXY["version"]], found


def test_fragments_and_changelog_yaml_lint():
    for args in (("lint",), ("lint-changelog-yaml", "changelogs/changelog.yaml")):
        proc = antsibull_changelog(*args)
        assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_changelog_rst_is_generated_from_changelog_yaml(tmp_path):
    proc = antsibull_changelog("generate", "--output", str(tmp_path / "CHANGELOG.rst"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "CHANGELOG.rst").read_text() == (ROOT / "CHANGELOG.rst").read_text(), (
        "CHANGELOG.rst is stale: run antsibull-changelog generate"
    )
