"""Make `ansible_collections.rayvllm.fleet` importable from a plain checkout."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "collections"))


class FakeClock:
    """A monotonic clock and sleep for wait loops: sleeping advances the clock at once."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
