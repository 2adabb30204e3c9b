"""The model role on this machine (local connection): each revision staged into a directory of its own and
model_path switched by link, idempotence, weights from before revisions moved, a download cut short, the
free-space check, an unpinned hub revision refused."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import ROOT, local_hosts

TINY_LLAMA = ROOT / "tests/fixtures/vllm-cpu/tiny_llama.py"
NODE = local_hosts(head=("node-a",), workers=())


def setup(tmp_path, **extra):
    source = tmp_path / "controller-copy"
    if not source.exists():
        subprocess.run([sys.executable, str(TINY_LLAMA), str(source)], check=True, capture_output=True)
    playbook = tmp_path / "model.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [rayvllm.fleet.fleet_facts, rayvllm.fleet.model]\n"
        "  tasks:\n    - name: link\n"
        "      ansible.builtin.include_role: {name: rayvllm.fleet.model, tasks_from: link.yml}\n"
    )
    group_vars = {
        "model_source": "controller",
        "model_controller_path": str(source),
        "model_path": str(tmp_path / "node" / "srv" / "models" / "tiny"),
        "model_owner": "root",
        "model_group": "root",
        **extra,
    }
    return str(playbook), group_vars


def revisions(tmp_path):
    return sorted(os.listdir(tmp_path / "node/srv/models/tiny.revisions"))


def test_a_revision_is_staged_beside_and_switched_by_link_then_nothing_to_do(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc == 0, out
    model = tmp_path / "node/srv/models/tiny"
    [revision] = revisions(tmp_path)
    assert revision.startswith("controller-") and model.is_symlink()
    assert os.readlink(model) == str(tmp_path / "node/srv/models/tiny.revisions" / revision)
    assert (model / "config.json").is_file() and (model / ".rayvllm-complete").is_file()
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc == 0, out
    assert "changed=0" in out
    # A changed copy on the controller is a new revision beside the first; the link moves to it.
    (tmp_path / "controller-copy/generation_config.json").write_text('{"temperature": 0.5}\n')
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc == 0, out
    assert len(revisions(tmp_path)) == 2 and os.path.basename(os.readlink(model)) != revision


def test_weights_staged_before_revisions_move_under_them(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    old = tmp_path / "node/srv/models/tiny"
    old.mkdir(parents=True)
    (old / "config.json").write_text("{}\n")
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc == 0, out
    assert "legacy" in revisions(tmp_path)
    assert (tmp_path / "node/srv/models/tiny.revisions/legacy/config.json").read_text() == "{}\n"
    assert old.is_symlink() and os.path.basename(os.readlink(old)).startswith("controller-")


def test_a_download_cut_short_leaves_the_serving_weights_and_no_revision_in_use(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc == 0, out
    model = tmp_path / "node/srv/models/tiny"
    serving = os.readlink(model)
    # An "interpreter" that writes half a file where the download goes, then dies (network gone).
    fake = tmp_path / "cut-short-python"
    fake.write_text('#!/bin/sh\nmkdir -p "$5" && echo half >"$5/model-00001.safetensors"\nexit 1\n')
    fake.chmod(0o755)
    commit = "0123456789abcdef0123456789abcdef01234567"
    hub = {"model_source": "hf", "model_hf_repo": "org/tiny", "model_hf_revision": commit, "model_hf_python": str(fake)}
    rc, out = run_preflight(NODE, {**group_vars, **hub}, playbook=playbook)
    assert rc != 0
    assert "the weights that serve are untouched" in out, out[-3000:]
    assert os.readlink(model) == serving
    assert f"hf-{commit}" not in revisions(tmp_path) and f"hf-{commit}.partial" in revisions(tmp_path)


def test_an_unpinned_hub_revision_is_refused(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    hub = {"model_source": "hf", "model_hf_repo": "org/tiny", "model_hf_revision": "main"}
    rc, out = run_preflight(NODE, {**group_vars, **hub}, playbook=playbook)
    assert rc != 0
    assert "model_hf_revision='main' on node-a is not a commit hash" in out
    assert "model_hf_allow_unpinned: true" in out
    assert not (tmp_path / "node/srv/models").exists()


def test_short_disk_fails_before_copying(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path, model_free_space_margin_gib=10**7)
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc != 0
    assert "but staging" in out and "GiB (weights still missing plus a 10000000 GiB margin)" in out
    assert not (tmp_path / "node/srv/models/tiny.revisions").exists()


def test_a_directory_without_config_json_is_never_moved(run_preflight, tmp_path):
    """model_path naming a directory that is not weights (here run without preflight, which refuses it first):
    the role's last guard fails the run and leaves the directory where and as it was."""
    playbook, group_vars = setup(tmp_path)
    not_weights = tmp_path / "node/srv/models/tiny"
    (not_weights / "bin").mkdir(parents=True)
    (not_weights / "bin/tool").write_text("#!/bin/sh\n")
    rc, out = run_preflight(NODE, group_vars, playbook=playbook)
    assert rc != 0
    assert f"model_path {not_weights} on node-a is a directory that holds no config.json" in " ".join(out.split())
    assert not_weights.is_dir() and not not_weights.is_symlink()
    assert (not_weights / "bin/tool").read_text() == "#!/bin/sh\n"
    assert "legacy" not in revisions(tmp_path)


def peers(tmp_path, names):
    """Hosts of this machine (127.0.0.1, .2, ...), each with its own model_path (the real fleet's nodes share the path,
    not the disk)."""
    return local_hosts(
        head=names[:1],
        workers=names[1:],
        **{name: {"model_path": str(tmp_path / name / "srv/models/tiny")} for name in names},
    )


def staged(tmp_path, name):
    model = tmp_path / name / "srv/models/tiny"
    return {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} if model.is_symlink() else None


def task_block(out, title):
    """The host lines under the first task whose title contains ``title``."""
    start = out.index(title)
    end = out.find("\nTASK [", start)
    return out[start:end]


def test_the_weights_leave_the_controller_once_and_a_later_node_fetches_them_from_a_peer(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    del group_vars["model_path"]
    three = ["node-a", "node-b", "node-c"]
    rc, out = run_preflight(peers(tmp_path, three), group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    copied = task_block(out, "copy the weights from the controller")
    assert "changed: [node-a]" in copied and "node-b" not in copied and "node-c" not in copied, copied
    assert "node-c: fetching the weights from node-b, then node-a" in out
    expected = staged(tmp_path, "node-a")
    assert expected and "config.json" in expected and ".rayvllm-manifest.json" in expected
    assert staged(tmp_path, "node-b") == expected and staged(tmp_path, "node-c") == expected
    rc, out = run_preflight(peers(tmp_path, three), group_vars, playbook=playbook)
    assert rc == 0 and "changed=0" in out and "share" not in out.split("PLAY RECAP")[0].lower(), out[-3000:]
    # A node joining later: from a peer (the node before it in the chain), not the controller; the others only serve.
    rc, out = run_preflight(peers(tmp_path, three + ["node-d"]), group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    assert "copy the weights from the controller" not in out or "changed: [node-d]" not in task_block(
        out, "copy the weights from the controller"
    )
    assert "node-d: fetching the weights from node-a, then node-b, then node-c" in out
    assert staged(tmp_path, "node-d") == expected


def test_a_damaged_part_on_a_node_is_found_and_fetched_again_naming_node_and_file(run_preflight, tmp_path):
    playbook, group_vars = setup(tmp_path)
    del group_vars["model_path"]
    two = ["node-a", "node-b"]
    rc, out = run_preflight(peers(tmp_path, two[:1]), group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    [revision] = os.listdir(tmp_path / "node-a/srv/models/tiny.revisions")
    # node-b was cut short earlier with a damaged start of config.json: resumed, it no longer matches.
    partial = tmp_path / f"node-b/srv/models/tiny.revisions/{revision}.partial"
    partial.mkdir(parents=True)
    good = (tmp_path / "node-a/srv/models/tiny/config.json").read_bytes()
    (partial / "config.json").write_bytes(b"#" + good[1:10])
    rc, out = run_preflight(peers(tmp_path, two), group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    # (YAML wraps the message and doubles its quote.)
    assert "node-b: config.json, resumed from an earlier transfer, does not match the" in " ".join(out.split())
    assert staged(tmp_path, "node-b") == staged(tmp_path, "node-a")


def test_the_hub_download_runs_on_one_node_and_the_others_fetch_from_peers(run_preflight, tmp_path):
    # A stand-in for the hub download (the model_hf_python interpreter: argv -c SCRIPT REPO REVISION DEST): it writes
    # the files where the download goes, and counts its runs in a file every local host shares.
    playbook, group_vars = setup(tmp_path)
    del group_vars["model_path"]
    runs = tmp_path / "downloads"
    fake = tmp_path / "hub-python"
    fake.write_text(
        f'#!/bin/sh\nmkdir -p "$5" && echo \'{{"model_type": "llama"}}\' >"$5/config.json" && head -c 300000 '
        f'/dev/zero >"$5/model.safetensors" && echo "$(hostname) $5" >>{runs}\n'
    )
    fake.chmod(0o755)
    commit = "0123456789abcdef0123456789abcdef01234567"
    hub = {"model_source": "hf", "model_hf_repo": "org/tiny", "model_hf_revision": commit, "model_hf_python": str(fake)}
    rc, out = run_preflight(peers(tmp_path, ["node-a", "node-b", "node-c"]), {**group_vars, **hub}, playbook=playbook)
    assert rc == 0, out[-3000:]
    [download] = runs.read_text().splitlines()  # once, for three nodes
    assert download.endswith(f"node-a/srv/models/tiny.revisions/hf-{commit}.partial")
    assert staged(tmp_path, "node-b") == staged(tmp_path, "node-a") == staged(tmp_path, "node-c")
    assert len(staged(tmp_path, "node-c")["model.safetensors"]) == 300000


def test_a_peer_that_dies_mid_transfer_is_named_and_the_nodes_behind_it_finish_from_the_others(run_preflight, tmp_path):
    """node-c fetches from node-b, then node-a; node-b's sharing process is killed while the weights stream through it
    (capped at 8 Mbit/s, so the 4 MB of weights take seconds): node-c finishes from node-a, node-b's failure is named,
    and node-b's next run resumes."""
    playbook, group_vars = setup(tmp_path, model_distribution_bwlimit=8)
    del group_vars["model_path"]
    (tmp_path / "controller-copy/model-00002.safetensors").write_bytes(os.urandom(4 << 20))
    three = ["node-a", "node-b", "node-c"]
    killed = []

    def kill_node_b_while_it_serves():
        # node-b's module listens on its own address (127.0.0.2) once it fetches and serves.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listening = subprocess.run(
                ["ss", "-Hltnp", "src", "127.0.0.2", "sport", "=", ":29870"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            pids = re.findall(r"pid=(\d+)", listening)
            if pids:
                time.sleep(1.5)  # a part of the weights has passed through it
                os.kill(int(pids[0]), signal.SIGKILL)
                killed.append(int(pids[0]))
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_node_b_while_it_serves)
    killer.start()
    rc, out = run_preflight(peers(tmp_path, three), group_vars, playbook=playbook)
    killer.join()
    assert killed, "node-b never served"
    assert "node-b did not get the weights: its sharing process ended without a result" in " ".join(out.split())
    assert "node-c: node-b went away (connection refused while fetching" in out
    assert rc != 0, out[-3000:]
    recap = out.split("PLAY RECAP")[1]
    assert re.search(r"node-b\s+:.*failed=1", recap) and re.search(r"node-c\s+:.*failed=0", recap), recap
    assert staged(tmp_path, "node-c") == staged(tmp_path, "node-a")
    # The next run: node-b resumes from what it has and ends with the same weights; nothing else moves.
    rc, out = run_preflight(peers(tmp_path, three), group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    assert staged(tmp_path, "node-b") == staged(tmp_path, "node-a")


def test_a_model_that_two_serving_modes_use_leaves_the_controller_once(run_preflight, tmp_path):
    """playbooks/stage.yml's fleet entry point: node-a and node-b serve tiny (a vllm_serve cluster's model), node-c
    serves tiny at a path of its own and chat (the models of a ray_serve node, model_stage_models). tiny is staged in
    one round on the three: the controller's copy reaches node-a only; chat, which node-c alone serves, node-c."""
    playbook, group_vars = setup(tmp_path)
    del group_vars["model_path"]
    chat = tmp_path / "controller-chat"
    chat.mkdir()
    (chat / "config.json").write_text('{"model_type": "llama", "name": "chat"}\n')
    Path(playbook).write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [rayvllm.fleet.fleet_facts]\n"
        "  tasks:\n    - name: stage\n"
        "      ansible.builtin.include_role: {name: rayvllm.fleet.model, tasks_from: fleet.yml}\n"
    )
    node_c = [
        {"model_path": str(tmp_path / "node-c/srv/b/tiny"), "model_source": "controller",
         "model_controller_path": group_vars["model_controller_path"]},
        {"model_path": str(tmp_path / "node-c/srv/b/chat"), "model_source": "controller",
         "model_controller_path": str(chat) + "/"},
    ]  # fmt: skip
    hosts = peers(tmp_path, ["node-a", "node-b", "node-c"])
    hosts["all"]["children"]["ray_workers"]["hosts"]["node-c"]["model_stage_models"] = node_c
    rc, out = run_preflight(hosts, group_vars, playbook=playbook)
    assert rc == 0, out[-3000:]
    copies = [
        (re.search(r"from the controller \((\w+)", block).group(1), host)
        for block in out.split("\nTASK [")
        if "copy the weights from the controller (" in block
        for host in re.findall(r"^changed: \[([\w-]+)\]", block, re.M)
    ]
    assert sorted(copies) == [("chat", "node-c"), ("tiny", "node-a")], copies
    assert "node-c: fetching the weights from node-b, then node-a" in out, out[-3000:]
    tiny = {name: tmp_path / name / "srv/models/tiny" for name in ("node-a", "node-b")}
    [revision] = os.listdir(tmp_path / "node-a/srv/models/tiny.revisions")
    on_c = tmp_path / "node-c/srv/b/tiny.revisions" / revision
    assert (on_c / ".rayvllm-complete").is_file()
    on_a = tmp_path / "node-a/srv/models/tiny.revisions" / revision
    assert (on_c / "config.json").read_bytes() == (on_a / "config.json").read_bytes()
    assert all((path.parent / "tiny.revisions" / revision / ".rayvllm-complete").is_file() for path in tiny.values())
    [chat_revision] = os.listdir(tmp_path / "node-c/srv/b/chat.revisions")
    assert (tmp_path / "node-c/srv/b/chat.revisions" / chat_revision / "config.json").is_file()
    assert not (tmp_path / "node-a/srv/b").exists()
    # Again: every model complete on every node, nothing moves.
    rc, out = run_preflight(hosts, group_vars, playbook=playbook)
    assert rc == 0 and "changed=0" in out and "fetching" not in out, out[-3000:]
