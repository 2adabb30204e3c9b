"""Verify tests of the sandbox: the shared helpers live in molecule/default/sandbox.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox import *  # noqa: E402,F403  (the tests import the helpers from conftest)
from sandbox import SETTINGS  # noqa: E402


@pytest.fixture(scope="session")
def settings():
    return SETTINGS
