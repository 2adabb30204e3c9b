"""Stages that change the sandbox fleet, each file run alone and in a fixed order by scripts/test.sh
after `molecule verify`, on the same converged fleet; each leaves the fleet as it found it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
