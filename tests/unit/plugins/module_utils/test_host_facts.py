"""What fleet_facts reads of a host in one module call (plugins/module_utils/backends/host_facts.py): the installed
packages from a recorded dpkg status database, and the facts from Ansible's own collectors on this machine."""

import os

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import host_facts

STATUS = """Package: python3
Status: install ok installed
Priority: important
Version: 3.11.2-1+b1
Description: interactive high-level object-oriented language
 A continuation line that mentions Status: install ok installed.

Package: nftables
Status: deinstall ok config-files
Version: 1.0.6-2

Package: ufw
Status: install reinstreq half-installed
Version: 0.36.2-1

Package: libc6
Status: install ok installed
Multi-Arch: same
Architecture: amd64

Package: libc6
Status: install ok installed
Multi-Arch: same
Architecture: i386

Package: curl
Status: hold ok installed
Version: 7.88.1-10

Package: ca-certificates
Status: install ok installed"""


def test_installed_packages_are_those_dpkg_shows_as_ii():
    # Removed with its configuration left, half-installed and held packages are not "ii"; a package of two
    # architectures is one name; the last paragraph has no blank line after it.
    assert host_facts.installed_packages(STATUS) == ["ca-certificates", "libc6", "python3"]


def test_installed_packages_of_an_empty_database():
    assert host_facts.installed_packages("") == []


def test_read_packages_of_a_host_without_dpkg(tmp_path):
    assert host_facts.read_packages(str(tmp_path / "missing")) == []


def test_read_packages_reads_the_file(tmp_path):
    path = tmp_path / "status"
    path.write_text(STATUS + "\n\n")
    assert host_facts.read_packages(str(path)) == ["ca-certificates", "libc6", "python3"]


class Module:
    """What Ansible's collectors call on a module: commands run for real on this machine."""

    params = {}

    def get_bin_path(self, name, required=False, opt_dirs=None):
        for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
            if os.access(os.path.join(d, name), os.X_OK):
                return os.path.join(d, name)
        return None

    def run_command(self, args, **kwargs):
        import subprocess

        p = subprocess.run(args, shell=isinstance(args, str), capture_output=True, text=True, check=False)
        return p.returncode, p.stdout, p.stderr


def test_collect_facts_names_them_as_setup_does():
    facts = host_facts.collect_facts(Module())
    # What the roles read: the OS, the architecture, the environment, the interfaces and their addresses.
    for key in ("distribution", "distribution_major_version", "architecture", "env", "interfaces"):
        assert "ansible_" + key in facts, key
    assert "lo" in facts["ansible_interfaces"]
    assert facts["ansible_lo"]["ipv4"]["address"] == "127.0.0.1"
    assert facts["ansible_env"].get("PATH") == os.environ.get("PATH")
    # Nothing of setup's other collectors (hardware, the user, SELinux...).
    assert "ansible_memtotal_mb" not in facts and "ansible_user_id" not in facts


PASSWD = """root:x:0:0:root:/root:/bin/bash
# a comment
+nisuser::::::
ray:x:999:998::/var/lib/ray:/usr/sbin/nologin
prometheus:x:998:997::/var/lib/prometheus:/usr/sbin/nologin
broken:x:notanumber:1::/:/bin/sh
vllm-router:x:997:996::/var/lib/vllm-router:/bin/bash
"""
GROUP = """root:x:0:
ray:x:998:prometheus,alice
prometheus:x:997:
vllm-router:x:996:
"""


def accounts():
    return host_facts.local_accounts(PASSWD, GROUP, exists=lambda path: path != "/var/lib/prometheus")


def test_local_accounts_reads_users_and_groups():
    a = accounts()
    assert sorted(a["users"]) == ["prometheus", "ray", "root", "vllm-router"]  # no comment, NIS entry, bad uid
    assert a["users"]["ray"] == {
        "uid": 999,
        "gid": 998,
        "home": "/var/lib/ray",
        "shell": "/usr/sbin/nologin",
        "home_exists": True,
    }
    assert a["users"]["prometheus"]["home_exists"] is False
    assert a["groups"]["ray"] == {"gid": 998, "members": ["prometheus", "alice"]}
    assert a["groups"]["prometheus"]["members"] == []


def test_read_accounts_of_missing_files(tmp_path):
    assert host_facts.read_accounts(str(tmp_path / "p"), str(tmp_path / "g")) == {"users": {}, "groups": {}}


def test_a_group_is_in_place_when_it_exists():
    assert host_facts.account_in_place(accounts(), group="ray")
    assert not host_facts.account_in_place(accounts(), group="grafana")
    assert not host_facts.account_in_place({}, group="ray")
    assert not host_facts.account_in_place(accounts())  # neither user nor group: nothing to judge


def test_a_user_is_in_place_only_when_every_given_attribute_matches():
    a = accounts()
    ray = dict(user="ray", group="ray", home="/var/lib/ray", shell="/usr/sbin/nologin", create_home=True)
    assert host_facts.account_in_place(a, **ray)
    # What the user module would change: another home, shell or primary group, a missing user or group.
    assert not host_facts.account_in_place(a, **{**ray, "home": "/home/ray"})
    assert not host_facts.account_in_place(a, **{**ray, "shell": "/bin/bash"})
    assert not host_facts.account_in_place(a, **{**ray, "group": "prometheus"})
    assert not host_facts.account_in_place(a, **{**ray, "group": "grafana"})
    assert not host_facts.account_in_place(a, **{**ray, "user": "grafana"})
    # A missing home matters only where the task creates it.
    assert host_facts.account_in_place(a, user="prometheus", group="prometheus", home="/var/lib/prometheus")
    assert not host_facts.account_in_place(a, user="prometheus", home="/var/lib/prometheus", create_home=True)
    # Unset attributes are not compared (the router's user has no group given).
    assert host_facts.account_in_place(a, user="vllm-router", home="/var/lib/vllm-router")


def test_supplementary_groups_by_membership_or_primary_group():
    a = accounts()
    assert host_facts.account_in_place(a, user="prometheus", groups=["ray"])
    assert host_facts.account_in_place(a, user="ray", groups=["ray"])  # its primary group
    assert not host_facts.account_in_place(a, user="vllm-router", groups=["ray"])
    assert not host_facts.account_in_place(a, user="prometheus", groups=["docker"])


def test_node_interface_names_the_interface_holding_the_nodes_address():
    facts = {
        "ansible_interfaces": ["lo", "eth0", "bond-1"],
        "ansible_lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}},
        "ansible_eth0": {"device": "eth0", "ipv4": {"address": "10.0.0.5"}},
        # A dash in the name becomes an underscore in the fact's key; secondary addresses count too.
        "ansible_bond_1": {"device": "bond-1", "ipv4": {"address": "192.168.1.5"},
                           "ipv4_secondaries": [{"address": "192.168.1.9"}]},
    }  # fmt: skip
    assert host_facts.node_interface(facts, "10.0.0.5") == "eth0"
    assert host_facts.node_interface(facts, "192.168.1.9") == "bond-1"
    # ray_node_interface wins; an address on no interface, or none, gives "" (the default route's is read anyway).
    assert host_facts.node_interface(facts, "10.0.0.5", "ib0") == "ib0"
    assert host_facts.node_interface(facts, "10.9.9.9") == ""
    assert host_facts.node_interface(facts, "") == ""


def test_collect_facts_falls_back_to_ansibles_collectors_where_the_lean_reading_does_not_apply(monkeypatch):
    monkeypatch.setattr(host_facts, "lean_facts", lambda module: None)
    facts = host_facts.collect_facts(Module())
    assert "lo" in facts["ansible_interfaces"] and facts["ansible_distribution"]
    assert facts.get("gather_subset") == ["!all", "network"]  # Ansible's collector ran


OS_RELEASE_DEBIAN = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
# a comment
HOME_URL="https://www.debian.org/"
"""
OS_RELEASE_UBUNTU = """NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=jammy
"""


def test_os_release_pairs_lose_their_quotes():
    pairs = host_facts.parse_os_release(OS_RELEASE_DEBIAN)
    assert pairs["ID"] == "debian" and pairs["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert "# a comment" not in pairs and pairs["VERSION_CODENAME"] == "bookworm"


def test_distribution_facts_name_debian_and_ubuntu_as_setup_does():
    debian = host_facts.distribution_facts(host_facts.parse_os_release(OS_RELEASE_DEBIAN), "12.11\n")
    assert debian == {
        "distribution": "Debian", "distribution_version": "12.11", "distribution_major_version": "12",
        "distribution_minor_version": "11", "distribution_release": "bookworm", "os_family": "Debian",
    }  # fmt: skip
    # Debian testing's debian_version is a codename pair: os-release's version stands.
    testing = host_facts.distribution_facts(host_facts.parse_os_release(OS_RELEASE_DEBIAN), "trixie/sid")
    assert testing["distribution_version"] == "12" and testing["distribution_minor_version"] == "NA"
    ubuntu = host_facts.distribution_facts(host_facts.parse_os_release(OS_RELEASE_UBUNTU), "bookworm/sid")
    assert (ubuntu["distribution"], ubuntu["distribution_version"], ubuntu["distribution_major_version"]) == (
        "Ubuntu", "22.04", "22",
    )  # fmt: skip
    assert ubuntu["distribution_release"] == "jammy"


def test_any_other_distribution_is_left_to_ansibles_collector():
    assert host_facts.distribution_facts({"ID": "rocky", "VERSION_ID": "9.3"}) is None
    assert host_facts.distribution_facts({}) is None


# `ip -j addr show` of a host with a bridge, a down interface, a labelled alias and a secondary address.
IP_ADDR = [
    {"ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536, "operstate": "UNKNOWN",
     "link_type": "loopback", "address": "00:00:00:00:00:00", "addr_info": [
         {"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host", "label": "lo"},
         {"family": "inet", "local": "127.0.0.5", "prefixlen": 8, "scope": "host", "secondary": True, "label": "lo"},
         {"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host"}]},
    {"ifname": "eth0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 1400, "operstate": "UP",
     "link_type": "ether", "address": "02:fc:00:00:00:01", "addr_info": [
         {"family": "inet", "local": "192.0.2.2", "prefixlen": 24, "broadcast": "192.0.2.255", "scope": "global",
          "label": "eth0"},
         {"family": "inet", "local": "10.0.0.11", "prefixlen": 16, "broadcast": "10.0.255.255", "scope": "global",
          "label": "eth0:ray"},
         {"family": "inet6", "local": "fe80::fc:ff:fe00:1", "prefixlen": 64, "scope": "link"}]},
    {"ifname": "br-9ed7d03ab9d7", "flags": ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "mtu": 1500,
     "operstate": "DOWN", "link_type": "ether", "address": "02:42:3b:26:a4:71", "addr_info": [
         {"family": "inet", "local": "10.77.0.1", "prefixlen": 24, "broadcast": "10.77.0.255", "scope": "global",
          "label": "br-9ed7d03ab9d7"}]},
]  # fmt: skip
ROUTE = {"dst": "8.8.8.8", "gateway": "10.0.0.1", "dev": "eth0", "prefsrc": "10.0.0.11", "flags": []}


def test_network_facts_as_setup_names_them():
    facts = host_facts.network_facts(IP_ADDR, ROUTE, bridges=["br-9ed7d03ab9d7"])
    assert facts["interfaces"] == ["lo", "eth0", "br-9ed7d03ab9d7"]
    assert facts["lo"]["ipv4"] == {
        "address": "127.0.0.1", "broadcast": "", "netmask": "255.0.0.0", "network": "127.0.0.0", "prefix": "8",
    }  # fmt: skip
    assert [a["address"] for a in facts["lo"]["ipv4_secondaries"]] == ["127.0.0.5"]
    assert facts["lo"]["type"] == "loopback" and "macaddress" not in facts["lo"] and facts["lo"]["active"]
    assert facts["eth0"]["macaddress"] == "02:fc:00:00:00:01" and facts["eth0"]["mtu"] == 1400
    assert facts["eth0"]["ipv6"] == [{"address": "fe80::fc:ff:fe00:1", "prefix": "64", "scope": "link"}]
    # A name with "-" is a key with "_", as setup's; a bridge without carrier is a bridge, not active.
    bridge = facts["br_9ed7d03ab9d7"]
    assert (bridge["device"], bridge["type"], bridge["active"]) == ("br-9ed7d03ab9d7", "bridge", False)
    assert facts["all_ipv4_addresses"] == ["192.0.2.2", "10.0.0.11", "10.77.0.1"]
    assert facts["all_ipv6_addresses"] == ["fe80::fc:ff:fe00:1"]


def test_the_default_address_is_the_routes_source_on_its_interface():
    default = host_facts.network_facts(IP_ADDR, ROUTE)["default_ipv4"]
    assert default["address"] == "10.0.0.11" and default["interface"] == "eth0" and default["gateway"] == "10.0.0.1"
    assert default["netmask"] == "255.255.0.0" and default["macaddress"] == "02:fc:00:00:00:01"
    assert host_facts.network_facts(IP_ADDR, None)["default_ipv4"] == {}


def test_a_labelled_address_belongs_to_its_device():
    # Ansible's collector makes "eth0:ray" an interface of its own; NCCL and firewalld know only eth0.
    facts = host_facts.network_facts(IP_ADDR, ROUTE)
    assert host_facts.interface_addresses(facts)["eth0"] == ["192.0.2.2", "10.0.0.11"]
    assert host_facts.node_interface(facts, "10.0.0.11") == "eth0"
    assert host_facts.node_interface(facts, "127.0.0.5") == "lo"


# `systemctl show --property=Id,ActiveState,UnitFileState -- '*.service' '*.timer'` of a converged node (trimmed).
SYSTEMCTL_SHOW = """Id=prometheus-node-exporter.service
ActiveState=active
UnitFileState=enabled

Id=vllm-router@tiny-llama.service
ActiveState=active
UnitFileState=enabled

Id=systemd-journald.service
ActiveState=active
UnitFileState=static

Id=vllm-watchdog.timer
ActiveState=active
UnitFileState=enabled

Id=ray-head.service
ActiveState=failed
UnitFileState=enabled

Id=prometheus.service
ActiveState=active
UnitFileState=disabled

Id=vllm.service
ActiveState=activating
UnitFileState=enabled
"""


def test_running_units_are_those_active_and_enabled_at_boot():
    # Not a static unit (systemd_service cannot enable it), a failed or starting one, nor one disabled at boot: the
    # roles check those as before.
    assert host_facts.running_units(SYSTEMCTL_SHOW) == [
        "prometheus-node-exporter.service",
        "vllm-router@tiny-llama.service",
        "vllm-watchdog.timer",
    ]
    assert host_facts.running_units("") == []


class Systemctl:
    """A module whose systemctl prints out with return code rc (or that has none)."""

    def __init__(self, rc=0, out="", present=True):
        self.rc, self.out, self.present, self.calls = rc, out, present, []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if self.present else None

    def run_command(self, args, **kwargs):
        self.calls.append(args)
        return self.rc, self.out, ""


def test_read_running_units_asks_systemctl_once_for_services_and_timers():
    module = Systemctl(out=SYSTEMCTL_SHOW)
    assert host_facts.read_running_units(module)[0] == "prometheus-node-exporter.service"
    assert module.calls == [
        ["/usr/bin/systemctl", "show", "--property=Id,ActiveState,UnitFileState", "--", "*.service", "*.timer"]
    ]


def test_no_running_units_without_systemd_or_where_systemctl_fails():
    # The roles then check every unit: nothing is skipped on a guess.
    assert host_facts.read_running_units(Systemctl(present=False)) == []
    assert host_facts.read_running_units(Systemctl(rc=1, out=SYSTEMCTL_SHOW)) == []
