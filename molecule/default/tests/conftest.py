"""Verify tests of the sandbox: the shared helpers live in molecule/default/sandbox.py."""

import sys
from pathlib import Path

import pytest

# The tests import the helpers from sandbox, as the stage tests do.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox import SETTINGS  # noqa: E402


@pytest.fixture(scope="session")
def settings():
    return SETTINGS
