"""Make `ansible_collections.rayvllm.fleet` importable from a plain checkout."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "collections"))
