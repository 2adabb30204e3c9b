"""What fleet_facts reads of a host in one module call (plugins/module_utils/host_facts.py): the installed packages
from a recorded dpkg status database, and the facts from Ansible's own collectors on this machine."""

import os

from ansible_collections.rayvllm.fleet.plugins.module_utils import host_facts

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
