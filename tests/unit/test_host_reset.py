from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import host_reset as hr

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


PASSWD = """root:x:0:0:root:/root:/bin/bash
ray:x:998:997::/var/lib/ray:/usr/sbin/nologin
prometheus:x:105:108::/var/lib/prometheus:/usr/sbin/nologin
alice:x:1000:1000::/home/alice:/bin/bash
"""
GROUP = """root:x:0:
ray:x:997:
prometheus:x:108:
alice:x:1000:
ops:x:996:alice
"""
RESET_PATHS = ("/opt/ray", "/var/lib/ray", "/var/lib/ray/tmp", "/etc/systemd/system/ray-*.service.d")


def _accounts(accounts, passwd=PASSWD, group=GROUP, paths=RESET_PATHS):
    return hr.accounts_to_remove(accounts, hr.parse_passwd(passwd), hr.parse_group(group), paths)


def test_the_service_account_and_its_group_made_by_host_prep_go():
    steps, lines = _accounts([{"user": "ray", "group": "ray"}])
    assert steps == [("user", "ray"), ("group", "ray")]
    assert lines == ["account ray (uid 998, home /var/lib/ray): remove", "group ray (gid 997): remove"]


def test_an_account_of_the_operators_stays():
    # A home the reset does not remove, a login account, root: none of them is the collection's to remove.
    assert _accounts([{"user": "ray", "group": "ray"}], passwd=PASSWD.replace("/var/lib/ray", "/home/ray")) == ([], [])
    assert _accounts([{"user": "alice", "group": "alice"}], paths=["/home/alice"]) == ([], [])
    assert _accounts([{"user": "root", "group": "root"}], paths=["/root"]) == ([], [])


def test_a_group_another_user_or_member_keeps_stays():
    shared = PASSWD + "svc:x:990:997::/srv/svc:/usr/sbin/nologin\n"
    assert _accounts([{"user": "ray", "group": "ray"}], passwd=shared)[0] == [("user", "ray")]
    member = GROUP.replace("ray:x:997:", "ray:x:997:ray,alice")
    assert _accounts([{"user": "ray", "group": "ray"}], group=member)[0] == [("user", "ray")]


def test_nothing_left_to_remove_changes_nothing():
    assert _accounts(
        [{"user": "ray", "group": "ray"}], passwd="root:x:0:0:root:/root:/bin/bash\n", group="root:x:0:\n"
    ) == ([], [])
    steps = hr.plan([], [], [], [])
    assert not steps["changed"] and steps["lines"] == []
