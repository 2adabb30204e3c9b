import os
import subprocess
import sys

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.venv_prune import (
    MARKER,
    installed_venvs,
    link_target,
    paths_in_use,
    prune,
    prune_plan,
    remove,
)


def venv(root, name, installed_at=None):
    path = root / name
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if installed_at is not None:
        (path / MARKER).write_text("ray[default]==x\n")
        os.utime(path / MARKER, (installed_at, installed_at))
    return str(path)


def test_keeps_current_previous_and_the_extra_count_newest_first():
    venvs = {"/r/2.57": 1.0, "/r/2.58": 2.0, "/r/2.59": 3.0, "/r/2.60": 4.0}
    assert prune_plan(venvs, "/r/2.60") == (["/r/2.60", "/r/2.59"], ["/r/2.58", "/r/2.57"])
    assert prune_plan(venvs, "/r/2.60", keep=1) == (["/r/2.60", "/r/2.59", "/r/2.58"], ["/r/2.57"])
    assert prune_plan(venvs, "/r/2.60", keep=5) == (["/r/2.60", "/r/2.59", "/r/2.58", "/r/2.57"], [])


def test_a_rollback_to_an_older_venv_keeps_the_newer_one_as_previous():
    # After a downgrade the current venv is older than the one just left: that one is the rollback target.
    venvs = {"/r/2.58": 1.0, "/r/2.59": 2.0, "/r/2.60": 3.0}
    assert prune_plan(venvs, "/r/2.59") == (["/r/2.59", "/r/2.60"], ["/r/2.58"])


def test_a_venv_in_use_is_kept_whatever_its_age():
    venvs = {"/r/a": 1.0, "/r/b": 2.0, "/r/c": 3.0, "/r/d": 4.0}
    assert prune_plan(venvs, "/r/d", in_use={"/r/a"}) == (["/r/d", "/r/c", "/r/a"], ["/r/b"])


def test_current_not_installed_yet_still_keeps_one_previous():
    # Check mode before the first install of the new version: nothing of it on disk.
    assert prune_plan({"/r/a": 1.0, "/r/b": 2.0}, "/r/new") == (["/r/b"], ["/r/a"])


def test_negative_keep_is_refused():
    with pytest.raises(ValueError, match="keep must be 0 or more"):
        prune_plan({}, "/r/a", keep=-1)


def test_installed_venvs_ages_by_marker_and_skips_links_files_and_non_venvs(tmp_path):
    old = venv(tmp_path, "2.59.0", installed_at=1000)
    new = venv(tmp_path, "2.60.0", installed_at=2000)
    cut_short = venv(tmp_path, "2.61.0")  # no marker: the install never completed
    (tmp_path / "current").symlink_to(new)
    (tmp_path / "notes").mkdir()  # not a venv
    (tmp_path / "README").write_text("x")
    assert installed_venvs(str(tmp_path)) == {old: 1000.0, new: 2000.0, cut_short: 0.0}
    assert installed_venvs(str(tmp_path / "missing")) == {}


def test_paths_in_use_sees_a_live_process_by_its_maps_and_command_line(tmp_path):
    used, idle = venv(tmp_path, "used"), venv(tmp_path, "idle")
    # A real process whose command line names a file inside the venv.
    script = os.path.join(used, "bin", "serve.py")
    with open(script, "w") as handle:
        handle.write("import time\ntime.sleep(30)\n")
    process = subprocess.Popen([sys.executable, script])
    try:
        assert paths_in_use([used, idle]) == {used}
    finally:
        process.kill()
        process.wait()
    # Prefix match on whole directory names: /x/used does not make /x/use in use.
    assert paths_in_use([used[:-1]]) == set()


def test_paths_in_use_reads_maps_of_a_fake_proc(tmp_path):
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    raylet = "/opt/ray/2.59.0/lib/python3.11/site-packages/ray/_raylet.so"
    (proc / "42" / "maps").write_text(f"7f00-7f01 r-xp 0 08:01 1 {raylet}\n")
    (proc / "42" / "cmdline").write_bytes(b"ray::IDLE\0")
    (proc / "self").mkdir()
    assert paths_in_use(["/opt/ray/2.59.0", "/opt/ray/2.58.0"], proc=str(proc)) == {"/opt/ray/2.59.0"}


def test_remove_reports_what_it_could_not_remove(tmp_path, monkeypatch):
    gone, stuck = venv(tmp_path, "gone"), venv(tmp_path, "stuck")
    real_rmtree = __import__("shutil").rmtree

    def rmtree(path):
        if path == stuck:
            raise PermissionError(13, "Permission denied", path)
        real_rmtree(path)

    monkeypatch.setattr("shutil.rmtree", rmtree)
    assert remove([gone, stuck]) == {stuck: "Permission denied"}
    assert not os.path.exists(gone) and os.path.exists(stuck)


def test_prune_keeps_the_linked_venv_and_removes_the_oldest(tmp_path):
    oldest = venv(tmp_path, "2.58.0", installed_at=1000)
    linked = venv(tmp_path, "2.59.0", installed_at=2000)  # what current points at: the serving venv
    previous = venv(tmp_path, "2.60.0", installed_at=3000)
    new = venv(tmp_path, "2.61.0", installed_at=4000)
    (tmp_path / "current").symlink_to(linked)
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    # Check mode: said, nothing removed.
    planned = prune(str(tmp_path), new, check_mode=True, proc=str(empty_proc))
    assert planned["pruned"] == [oldest] and os.path.isdir(oldest)
    assert planned["kept"] == [new, previous, linked] and planned["in_use"] == [linked]
    assert planned["diff"]["before"].splitlines() == [oldest, linked, previous, new]
    assert planned["diff"]["after"].splitlines() == [linked, previous, new]
    assert planned["error"] == ""
    done = prune(str(tmp_path), new, proc=str(empty_proc))
    assert done["pruned"] == [oldest] and not os.path.exists(oldest)
    assert prune(str(tmp_path), new, proc=str(empty_proc))["pruned"] == []  # a second run removes nothing


def test_prune_names_what_it_could_not_remove_and_the_fix(tmp_path, monkeypatch):
    oldest = venv(tmp_path, "a", installed_at=1000)
    venv(tmp_path, "b", installed_at=2000)
    new = venv(tmp_path, "c", installed_at=3000)
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr("shutil.rmtree", refuse)
    result = prune(str(tmp_path), new, proc=str(empty_proc))
    assert result["pruned"] == []
    assert result["error"] == (
        "could not remove %s (Permission denied); remove them by hand or fix their permissions, then re-run" % oldest
    )


def test_link_target_is_the_real_path_of_a_link_and_empty_otherwise(tmp_path):
    target = venv(tmp_path, "2.60.0", installed_at=1)
    (tmp_path / "current").symlink_to(target)
    assert link_target(str(tmp_path / "current")) == target
    assert link_target(str(tmp_path / "2.60.0")) == ""  # a directory, not a link
    assert link_target(str(tmp_path / "missing")) == ""
    assert link_target("") == ""
