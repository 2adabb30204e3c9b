"""What preflight reads of a host in one module call (plugins/module_utils/backends/host_probe.py), fed recorded /proc
texts, a fake /proc directory and a fake command runner."""

import os

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import host_probe

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
TCP = HEADER + (
    # 0.0.0.0:8080 listening, root; 127.0.0.1:3306 listening, uid 997; an established connection (not listening).
    "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0 100\n"
    "   1: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   997        0 23456 1 0 100\n"
    "   2: 0A4D000A:C350 0B4D000A:1F90 01 00000000:00000000 00:00000000 00000000     0        0 34567 1 0 20\n"
)
TCP6 = HEADER + (
    # [::]:8000 and [::1]:9090 listening.
    "   0: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 45678 1 0 100\n"
    "   1: 00000000000000000000000001000000:2382 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000 99999        0 56789 1 0 100\n"
)
ROUTE = (
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
)


class Runner:
    """Answers commands from a table {argv tuple: (rc, stdout, stderr)}; anything else is a missing program."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout=20):
        self.calls.append(tuple(argv))
        return self.answers.get(tuple(argv), (127, "", "%s: not found" % argv[0]))


def fake_proc(tmp_path, sockets):
    """A /proc with meminfo, net/{tcp,tcp6,route} and one process per {pid: (comm, [socket inodes])}."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal:       24634512 kB\nMemFree:         1024 kB\n")
    (proc / "net" / "tcp").write_text(TCP)
    (proc / "net" / "tcp6").write_text(TCP6)
    (proc / "net" / "route").write_text(ROUTE)
    for pid, (comm, inodes) in sockets.items():
        fd = proc / str(pid) / "fd"
        fd.mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm + "\n")
        os.symlink("/dev/null", fd / "0")
        for number, inode in enumerate(inodes, start=3):
            os.symlink("socket:[%s]" % inode, fd / str(number))
    return proc


def test_listeners_reads_both_tables_and_skips_connections_that_do_not_listen():
    found = host_probe.listeners([TCP, TCP6])
    assert [(s["address"], s["port"], s["uid"], s["inode"]) for s in found] == [
        ("0.0.0.0", 8080, 0, "12345"),
        ("127.0.0.1", 3306, 997, "23456"),
        ("::", 8000, 0, "45678"),
        ("::1", 9090, 99999, "56789"),
    ]


def test_a_short_or_garbled_line_is_skipped_not_fatal():
    garbled = HEADER + "   0: zz:1F90 00000000:0000 0A x x x 0 0 1\n   1: too short\n"
    assert host_probe.listeners([garbled, ""]) == []


def test_listening_ports_names_the_user_and_the_process_holding_each_wanted_port(tmp_path):
    proc = fake_proc(tmp_path, {4242: ("raylet", ["12345"]), 77: ("prometheus", ["56789"])})
    ports = host_probe.listening_ports([TCP, TCP6], [8080, 9090, 443], str(proc))
    assert ports == [
        {"port": 8080, "address": "0.0.0.0", "user": "root", "pid": 4242, "name": "raylet"},
        # A uid without a passwd entry is shown as its number; a socket whose process is not visible has no pid.
        {"port": 9090, "address": "::1", "user": "99999", "pid": 77, "name": "prometheus"},
    ]
    assert host_probe.listening_ports([TCP], [3306], str(proc))[0]["pid"] is None


def test_listening_ports_without_a_port_list_gives_every_listening_socket(tmp_path):
    # host_facts' probe reads them all: the fleet model, which knows each host's ports, does not exist yet.
    proc = fake_proc(tmp_path, {4242: ("raylet", ["12345"])})
    ports = host_probe.listening_ports([TCP, TCP6], None, str(proc))
    wanted = [(3306, "127.0.0.1"), (8000, "::"), (8080, "0.0.0.0"), (9090, "::1")]
    assert [(s["port"], s["address"]) for s in ports] == wanted
    assert ports[2]["name"] == "raylet" and ports[2]["user"] == "root"


def test_memory_and_the_default_route_interface():
    assert host_probe.memory_mib("MemTotal:       24634512 kB\n") == 24057
    assert host_probe.memory_mib("") == 0
    assert host_probe.default_route_interface(ROUTE) == "eth0"
    assert host_probe.default_route_interface(ROUTE.splitlines()[0] + "\n") == ""


def test_python_version_or_why_the_interpreter_does_not_run():
    runner = Runner(
        {("/usr/bin/python3", "-c", "import platform; print(platform.python_version())"): (0, "3.11.2\n", "")}
    )
    assert host_probe.python_version("/usr/bin/python3", runner, running="") == {"version": "3.11.2"}
    assert host_probe.python_version("/opt/python3.12", runner, running="") == {"error": "/opt/python3.12: not found"}


def test_python_version_of_the_interpreter_the_probe_runs_on_needs_no_second_process(tmp_path):
    import platform
    import sys

    link = tmp_path / "python3"
    link.symlink_to(sys.executable)  # a link to it (a venv's python) is the same interpreter
    nothing = Runner({})
    assert host_probe.python_version(str(link), nothing) == {"version": platform.python_version()}
    assert host_probe.python_version(str(tmp_path / "other"), nothing)["error"]


def test_firewalls_and_the_firewalld_zone_of_each_interface():
    runner = Runner(
        {
            ("ufw", "status"): (0, "Status: active\n\nTo Action From\n", ""),
            ("systemctl", "is-active", "--quiet", "firewalld"): (0, "", ""),
            ("firewall-cmd", "--get-zone-of-interface=eth0"): (0, "public\n", ""),
            ("firewall-cmd", "--get-zone-of-interface=eth1"): (2, "no zone\n", ""),
            ("firewall-cmd", "--get-default-zone"): (0, "trusted\n", ""),
            ("firewall-cmd", "--info-zone", "public"): (0, "public (active)\n  target: default\n  services: ssh\n", ""),
            ("firewall-cmd", "--info-zone", "trusted"): (0, "trusted\n  target: ACCEPT\n", ""),
        }
    )
    assert host_probe.firewalls(runner) == ["ufw", "firewalld"]
    assert host_probe.firewalld_zones(["eth0", "eth1"], runner) == [
        {"interface": "eth0", "zone": "public", "target": "default"},
        # An interface bound to no zone goes to the default zone.
        {"interface": "eth1", "zone": "trusted", "target": "ACCEPT"},
    ]
    assert host_probe.firewalls(Runner({("ufw", "status"): (0, "Status: inactive\n", "")})) == []


def test_path_state_marks_a_model_directory_and_follows_links(tmp_path):
    model = tmp_path / "models" / "llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    os.symlink(model, tmp_path / "current")
    assert host_probe.path_state(str(model)) == {
        "exists": True,
        "link": False,
        "dir": True,
        "config": True,
        "real": str(model),
    }
    assert host_probe.path_state(str(tmp_path / "current"))["link"] is True
    assert host_probe.path_state(str(tmp_path / "current"))["real"] == str(model)
    assert host_probe.path_state(str(tmp_path / "models"))["config"] is False
    assert host_probe.path_state(str(tmp_path / "absent"))["exists"] is False


def test_probe_reads_everything_at_once_and_asks_firewalld_only_when_it_runs(tmp_path):
    proc = fake_proc(tmp_path, {4242: ("raylet", ["12345"])})
    shm = tmp_path / "shm"
    shm.mkdir()
    answers = {
        ("python3", "-c", "import platform; print(platform.python_version())"): (0, "3.11.2\n", ""),
        ("systemctl", "is-active", "--quiet", "firewalld"): (0, "", ""),
        ("firewall-cmd", "--get-zone-of-interface=eth0"): (0, "public\n", ""),
        ("firewall-cmd", "--get-zone-of-interface=eth1"): (0, "internal\n", ""),
        ("firewall-cmd", "--info-zone", "public"): (0, "  target: default\n", ""),
        ("firewall-cmd", "--info-zone", "internal"): (0, "  target: default\n", ""),
    }
    result = host_probe.probe(
        python="python3", shm=str(shm), ports=[8080], firewall_interfaces=["eth1", "eth0"], paths=[str(shm)],
        runner=Runner(answers), proc=str(proc),
    )  # fmt: skip
    assert result["python"] == {"version": "3.11.2"}
    assert result["shm_mib"] > 0 and result["memory_mib"] == 24057
    assert result["listening"] == [{"port": 8080, "address": "0.0.0.0", "user": "root", "pid": 4242, "name": "raylet"}]
    assert result["firewalls"] == ["firewalld"]
    # The default route's interface first, then the given ones, each once.
    assert [z["interface"] for z in result["firewalld_zones"]] == ["eth0", "eth1"]
    assert result["paths"][str(shm)]["dir"] is True

    quiet = Runner({})
    result = host_probe.probe(shm=str(tmp_path / "no-shm"), runner=quiet, proc=str(proc))
    assert result["python"] == {} and result["shm_mib"] == 0 and result["firewalld_zones"] == []
    assert not any(call[0] == "firewall-cmd" for call in quiet.calls)
