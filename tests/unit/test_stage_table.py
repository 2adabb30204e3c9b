"""scripts/stage-table.py: the per-stage table scripts/test.sh prints at its end (stage, seconds, tests passed,
failed and skipped)."""

import importlib.util
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "stage-table.py"
_spec = importlib.util.spec_from_file_location("stage_table", SCRIPT)
stage_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage_table)


def test_counts_read_the_last_pytest_summary_quiet_or_verbose():
    quiet = "....s\n12 passed, 1 skipped in 30.12s\n"
    assert stage_table.counts(quiet) == {"passed": 12, "failed": 0, "skipped": 1}
    verbose = (
        "=== 3 passed in 1.00s ===\nmore output\n"
        "========= 1 failed, 4 passed, 2 skipped, 1 error in 812.40s (0:13:32) =========\n"
    )
    assert stage_table.counts(verbose) == {"passed": 4, "failed": 2, "skipped": 2}


def test_a_log_without_a_pytest_summary_has_no_counts():
    assert stage_table.counts("ansible-test sanity: passed\n") is None
    assert stage_table.row("sanity", 121.7, "no summary") == "sanity\t121\t-\t-\t-"
    assert stage_table.row("lint", 88) == "lint\t88\t-\t-\t-"


def test_the_table_lists_each_stage_and_the_totals(tmp_path):
    table = tmp_path / "table.tsv"
    log = tmp_path / "verify.log"
    log.write_text("81 passed, 1 skipped in 270.5s\n")
    for args in (
        ["lint and unit", "88"],
        ["verify", "270.9", str(log)],
        ["integration tests (beside)", "500", str(log)],
    ):
        subprocess.run([sys.executable, str(SCRIPT), "add", str(table), *args], check=True)
    out = subprocess.run([sys.executable, str(SCRIPT), "print", str(table)], check=True, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["stage", "seconds", "passed", "failed", "skipped"]
    assert lines[2].split() == ["lint", "and", "unit", "88", "-", "-", "-"]
    assert lines[3].split() == ["verify", "270", "81", "0", "1"]
    assert lines[4].split() == ["integration", "tests", "(beside)", "500", "81", "0", "1"]
    # The wall time: what ran beside the others is not added.
    assert lines[-1].split() == ["total", "358", "162", "0", "2"]
