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


VERIFY_LOG = (
    "tests/test_monitoring.py::test_grafana_server_serves_the_dashboards SKIPPED [ 19%]\n"
    "tests/test_vllm.py::test_bad_model_path[ansible://ray-head] SKIPPED (no)\n"
    "tests/test_vllm.py::test_ok PASSED\n"
    "=== 1 passed, 2 skipped in 12.00s ===\n"
)


def test_a_skip_docs_testing_md_does_not_list_fails_the_run():
    listing = "| `molecule/default/tests/test_monitoring.py::test_grafana_server_serves_the_dashboards` | no registry |"
    problems = stage_table.unlisted_skips(listing, {"verify.log": VERIFY_LOG})
    assert problems == [
        "verify.log: test_vllm.py::test_bad_model_path skipped, and docs/testing.md does not list it with a reason"
    ]
    listing += "\n| `test_vllm.py::test_bad_model_path` | why |"
    assert stage_table.unlisted_skips(listing, {"verify.log": VERIFY_LOG}) == []


def test_a_quiet_log_with_skips_it_cannot_name_fails_and_one_without_skips_passes():
    problems = stage_table.unlisted_skips("", {"unit.log": "...s.\n4 passed, 1 skipped in 2.00s\n"})
    assert problems == ["unit.log: 1 skipped, 0 of them named: run it with -v so that each skip can be checked"]
    assert stage_table.unlisted_skips("", {"unit.log": "....\n4 passed in 2.00s\n", "sanity.log": "passed"}) == []


def test_the_repositorys_listing_names_every_test_ci_skips_and_none_that_runs():
    """The skips of CI's stages (their -v lines) are each listed in docs/testing.md; the tests that once waited for
    RAYVLLM_SLOW_TESTS and now run in CI are not, so a skip of any of them fails the run."""
    listing = (ROOT / "docs" / "testing.md").read_text()
    assert stage_table.unlisted_skips(listing, {"verify.log": VERIFY_LOG.splitlines(True)[0]}) == []
    for test in (
        "test_1_monitoring_changes.py::test_release_archive_install_checks_the_checksum_and_switches_back",
        "test_2_faults.py::test_a_restarted_head_host_comes_back_serving",
        "test_3_fifth_host.py::test_new_hosts_join_both_clusters_with_one_site_yml_while_vllm_and_serve_keep_running",
        "test_4_upgrade.py::test_a_new_version_that_fails_its_gate_is_rolled_back_and_the_run_fails",
        "test_4_upgrade.py::test_a_ray_serve_cluster_whose_new_versions_fail_is_rolled_back_to_its_ray_vllm_and_serve_config",
        "test_5_ray_serve.py::test_a_replicas_change_applies_in_place_under_router_load",
        "test_5_ray_serve.py::test_an_engine_kwargs_change_rolls_under_router_load_with_no_failed_request",
        "test_5_ray_serve.py::test_an_engine_kwargs_change_that_fails_is_rolled_back_and_the_run_fails_naming_it",
    ):
        assert stage_table.unlisted_skips(listing, {"stages": "molecule/default/stages/%s SKIPPED\n" % test}), test


def test_the_skips_command_exits_1_on_an_unlisted_skip(tmp_path):
    listing, log = tmp_path / "testing.md", tmp_path / "verify.log"
    listing.write_text("nothing listed\n")
    log.write_text(VERIFY_LOG)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "skips", str(listing), str(log)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1 and "test_grafana_server_serves_the_dashboards skipped" in run.stdout
