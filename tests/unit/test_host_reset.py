from ansible_collections.rayvllm.fleet.plugins.module_utils import host_reset as hr

UNITS = ["ray-*.service", "vllm.service", "vllm-router@*.service", "vllm-watchdog.timer"]


def test_parse_units_matches_globs_and_template_instances():
    listing = """ray-head.service loaded active running Ray head
vllm.service loaded failed failed vLLM
vllm-router@tiny-llama.service loaded active running vllm-router
● vllm-watchdog.timer not-found inactive dead vllm-watchdog.timer
ssh.service loaded active running OpenBSD Secure Shell server
"""
    assert hr.parse_units(listing, UNITS) == [
        "ray-head.service",
        "vllm-router@tiny-llama.service",
        "vllm-watchdog.timer",
        "vllm.service",
    ]
    assert hr.parse_units("", UNITS) == []


def test_unit_to_stop():
    assert hr.unit_to_stop({"ActiveState": "active", "UnitFileState": "disabled"})
    assert hr.unit_to_stop({"ActiveState": "failed", "UnitFileState": ""})
    assert hr.unit_to_stop({"ActiveState": "inactive", "UnitFileState": "enabled"})
    assert not hr.unit_to_stop({"ActiveState": "inactive", "UnitFileState": "disabled"})
    assert not hr.unit_to_stop({"LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""})


def test_parse_processes_skips_own_and_unrelated():
    ps = """    1 /lib/systemd/systemd
  210 ray::IDLE
  211 /opt/ray/2.59.0/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --x
  300 /usr/bin/python3 /root/.ansible/tmp/AnsiballZ_host_reset.py
  301 sshd: root
"""
    found = hr.parse_processes(ps, ["ray::", "/raylet", "/opt/ray/"], own_pids=(300,))
    assert [pid for pid, _name in found] == [210, 211]


def test_plan_lists_everything_and_nothing_on_a_clean_host():
    steps = hr.plan(["ray-head.service"], [(210, "ray::IDLE")], ["/opt/ray"], ["/dev/shm/plasma_1"])
    assert steps["changed"]
    assert steps["lines"] == [
        "unit ray-head.service: stop and disable",
        "process 210 (ray::IDLE): kill",
        "/opt/ray: remove",
        "/dev/shm segment /dev/shm/plasma_1: remove",
    ]
    assert steps["processes"] == [210]
    clean = hr.plan([], [], [], [])
    assert clean["changed"] is False and clean["lines"] == []
