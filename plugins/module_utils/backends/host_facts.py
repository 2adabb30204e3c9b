# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What roles/fleet_facts reads on every host once per run, in one module call (rayvllm.fleet.host_facts): the facts
the roles read (read directly on Debian and Ubuntu, else by a few of Ansible's own fact collectors), and the names of
the installed packages from dpkg's database (read as a file: no dpkg-query, no shell, no apt cache), and the units
that run and start at boot (one systemctl call)."""

from __future__ import annotations

import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.host_probe import read

# The fact collectors run: the OS (distribution), the architecture and host names (platform), the login user's
# environment (env: the firewall keeps Ansible's own SSH connection open from SSH_CONNECTION) and the network
# (interfaces and their addresses, the default route). Nothing else of setup's "min" subset is read by a role.
FACT_SUBSETS = ("distribution", "platform", "env", "network")

DPKG_STATUS = "/var/lib/dpkg/status"


def installed_packages(text):
    """The sorted, unique names of the packages dpkg's status database (its text) lists as installed and not broken:
    Status "install ok installed", what `dpkg-query -W -f='${db:Status-Abbrev}'` shows as "ii"."""
    names = set()
    package = status = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if package and status == ["install", "ok", "installed"]:
                names.add(package)
            package = status = None
        elif line.startswith("Package:"):
            package = line.split(":", 1)[1].strip()
        elif line.startswith("Status:"):
            status = line.split(":", 1)[1].split()
    return sorted(names)


def read_packages(path=DPKG_STATUS):
    """installed_packages() of the file at path; [] where there is none (a host without dpkg, which preflight refuses
    by its OS)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return installed_packages(f.read())
    except FileNotFoundError:
        return []


# The units whose states are read: the services and timers systemd has loaded (a unit that runs is always loaded).
UNIT_PATTERNS = ("*.service", "*.timer")


def running_units(text):
    """The sorted names of the units `systemctl show --property=Id,ActiveState,UnitFileState` (its text: one block of
    KEY=value lines per unit, blank lines between) describes as active and enabled at boot: those that a
    "state: started, enabled: true" of ansible.builtin.systemd_service would leave as they are."""
    names = []
    for block in text.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id") and props.get("ActiveState") == "active" and props.get("UnitFileState") == "enabled":
            names.append(props["Id"])
    return sorted(names)


def read_running_units(module):
    """running_units() of the host's loaded services and timers, in one systemctl call; [] without systemctl or where
    it fails (the roles then check each of their units as before)."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return []
    rc, out, _err = module.run_command(
        [systemctl, "show", "--property=Id,ActiveState,UnitFileState", "--"] + list(UNIT_PATTERNS)
    )
    return running_units(out) if rc == 0 else []


# The distributions read without Ansible's collectors (os-release's ID): their names and versions are setup's
# (distribution "Debian" 12.7 from /etc/debian_version, "Ubuntu" 22.04), and the roles support no other (apt, dpkg).
LEAN_DISTRIBUTIONS = {"debian": "Debian", "ubuntu": "Ubuntu"}
# setup's interface types, from `ip -j`'s link types.
LINK_TYPES = {"ether": "ether", "loopback": "loopback", "infiniband": "infiniband", "ppp": "ppp", "none": "tunnel"}
# The default route's source address and interface, as setup finds them (a route lookup, no traffic).
ROUTE_PROBE = "8.8.8.8"


def parse_os_release(text):
    """The KEY=value pairs of an os-release file (quotes removed)."""
    import shlex

    result = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            try:
                words = shlex.split(value)
            except ValueError:
                words = [value.strip()]
            result[key.strip()] = words[0] if words else ""
    return result


def distribution_facts(os_release, debian_version=""):
    """setup's distribution facts of a Debian or Ubuntu host, from its os-release pairs (and /etc/debian_version's
    text on Debian); None for any other distribution (the caller then runs Ansible's own collector)."""
    name = LEAN_DISTRIBUTIONS.get(os_release.get("ID", ""))
    if name is None:
        return None
    version = os_release.get("VERSION_ID", "")
    if name == "Debian" and re.match(r"^\d+(\.\d+)*$", debian_version.strip()):
        version = debian_version.strip()  # setup's Debian version: 12.7, where os-release says 12
    parts = version.split(".")
    return {
        "distribution": name,
        "distribution_version": version,
        "distribution_major_version": parts[0] if version else "",
        "distribution_minor_version": parts[1] if len(parts) > 1 else "NA",
        "distribution_release": os_release.get("VERSION_CODENAME", "") or os_release.get("UBUNTU_CODENAME", ""),
        "os_family": "Debian",
    }


def _ipv4(entry):
    """setup's form of one IPv4 address of `ip -j addr` (prefix as a string, netmask, network, broadcast)."""
    import ipaddress

    net = ipaddress.IPv4Interface("%s/%s" % (entry["local"], entry["prefixlen"])).network
    return {
        "address": entry["local"],
        "broadcast": entry.get("broadcast", ""),
        "netmask": str(net.netmask),
        "network": str(net.network_address),
        "prefix": str(entry["prefixlen"]),
    }


def network_facts(links, route=None, bridges=()):
    """setup's network facts (the keys the roles and the fleet model read) from `ip -j addr show` (links: its parsed
    list) and `ip -j -4 route get 8.8.8.8` (route: its first entry, or None without a default route): "interfaces",
    one entry per interface named after it ("-" as "_") with "device", "active", "type", "mtu", "macaddress",
    "ipv4" (its first IPv4 address), "ipv4_secondaries" (every other one, labelled or not: an address belongs to
    its device, not to a label such as eth0:1) and "ipv6"; "default_ipv4" (the route's interface and source address,
    with its gateway); "all_ipv4_addresses", "all_ipv6_addresses". bridges: the names of bridge devices."""
    facts = {"interfaces": [], "all_ipv4_addresses": [], "all_ipv6_addresses": []}
    entries = {}
    for link in links:
        name = link.get("ifname")
        if not name:
            continue
        kind = "bridge" if name in bridges else LINK_TYPES.get(link.get("link_type"), "unknown")
        entry = {
            "device": name,
            "active": str(link.get("operstate", "")).lower() != "down",  # setup's: /sys/class/net/<name>/operstate
            "type": kind,
            "mtu": link.get("mtu"),
            "promisc": "PROMISC" in link.get("flags", []),
        }
        if link.get("address") and kind not in ("loopback", "tunnel"):
            entry["macaddress"] = link["address"]
        ipv4 = [_ipv4(a) for a in link.get("addr_info", []) if a.get("family") == "inet" and a.get("local")]
        ipv6 = [
            {"address": a["local"], "prefix": str(a.get("prefixlen", "")), "scope": a.get("scope", "")}
            for a in link.get("addr_info", [])
            if a.get("family") == "inet6" and a.get("local")
        ]
        if ipv4:
            entry["ipv4"] = ipv4[0]
        if ipv4[1:]:
            entry["ipv4_secondaries"] = ipv4[1:]
        if ipv6:
            entry["ipv6"] = ipv6
        facts["interfaces"].append(name)
        facts[name.replace("-", "_")] = entries[name] = entry
        facts["all_ipv4_addresses"].extend(a["address"] for a in ipv4 if not a["address"].startswith("127."))
        facts["all_ipv6_addresses"].extend(a["address"] for a in ipv6 if a["address"] != "::1")
    default = {}
    device = entries.get(route.get("dev")) if route else None
    if device:
        addresses = [device["ipv4"]] + device.get("ipv4_secondaries", []) if "ipv4" in device else []
        address = next((a for a in addresses if a["address"] == route.get("prefsrc")), (addresses or [{}])[0])
        default = dict(
            address,
            address=route.get("prefsrc") or address.get("address", ""),
            interface=route["dev"],
            alias=route["dev"],
            gateway=route.get("gateway", ""),
            mtu=device["mtu"],
            type=device["type"],
        )
        if "macaddress" in device:
            default["macaddress"] = device["macaddress"]
    facts["default_ipv4"] = default
    return facts


def platform_facts():
    """setup's platform facts of this host but its fully qualified name and domain (a DNS lookup, which no role
    needs) and the user space's architecture."""
    import platform

    node = platform.node()
    machine = platform.machine()
    return {
        "system": platform.system(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": machine,
        "architecture": "i386" if re.match(r"i[3-6]86$", machine) else machine,
        "nodename": node,
        "hostname": node.split(".")[0],
        "python_version": platform.python_version(),
        "machine_id": read("/etc/machine-id").strip(),
    }


def _ip_json(module, ip, *args):
    """The parsed JSON output of `ip -j ARGS`; None where it fails or prints no JSON."""
    import json

    rc, out, _err = module.run_command([ip, "-j"] + list(args))
    try:
        return json.loads(out) if rc == 0 else None
    except ValueError:
        return None


def lean_facts(module):
    """The facts of FACT_SUBSETS read directly on a Debian or Ubuntu host with iproute2's JSON output: two `ip`
    calls and a few files, where Ansible's collectors import every collector and run `ip` twice per interface. None
    where that does not hold (another distribution, no `ip -j`): the caller runs Ansible's collectors."""
    import os

    distribution = distribution_facts(parse_os_release(read("/etc/os-release")), read("/etc/debian_version"))
    ip = module.get_bin_path("ip") if distribution else None
    if not ip:
        return None
    links = _ip_json(module, ip, "addr", "show")
    if not isinstance(links, list):
        return None
    routes = _ip_json(module, ip, "-4", "route", "get", ROUTE_PROBE)
    try:
        bridges = [name for name in os.listdir("/sys/class/net") if os.path.isdir("/sys/class/net/%s/bridge" % name)]
    except OSError:
        bridges = []
    facts = dict(distribution, env=dict(os.environ))
    facts.update(platform_facts())
    facts.update(network_facts(links, routes[0] if isinstance(routes, list) and routes else None, bridges))
    return dict(("ansible_" + key, value) for key, value in facts.items())


def collect_facts(module, timeout=10):
    """Ansible's facts of FACT_SUBSETS (the keys setup returns, with their ansible_ prefix): lean_facts() where it
    applies, else Ansible's own collectors (these only: setup's minimal subset runs about a dozen more; imported only
    here, as ansible.module_utils.facts imports every collector). The network facts are Linux's (preflight refuses
    any other OS)."""
    lean = lean_facts(module)
    if lean is not None:
        return lean
    from ansible.module_utils.facts import ansible_collector
    from ansible.module_utils.facts.namespace import PrefixFactNamespace
    from ansible.module_utils.facts.network.linux import LinuxNetworkCollector
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.env import EnvFactCollector
    from ansible.module_utils.facts.system.platform import PlatformFactCollector

    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=[
            DistributionFactCollector,
            PlatformFactCollector,
            EnvFactCollector,
            LinuxNetworkCollector,
        ],
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec=[],
        gather_subset=["!all", "network"],
        gather_timeout=timeout,
        minimal_gather_subset=frozenset(FACT_SUBSETS) - {"network"},
    )
    return collector.collect(module=module)


def interface_addresses(facts):
    """{interface device name: [IPv4 addresses]} from Ansible's network facts."""
    result = {}
    names = facts.get("interfaces") if isinstance(facts, dict) else None
    for name in names if isinstance(names, list) else []:
        if not isinstance(name, str):
            continue
        info = facts.get(name.replace("-", "_")) or facts.get(name) or {}
        if not isinstance(info, dict):
            continue
        addresses = []
        ipv4 = info.get("ipv4") if isinstance(info.get("ipv4"), dict) else {}
        if ipv4.get("address"):
            addresses.append(ipv4["address"])
        secondaries = info.get("ipv4_secondaries") if isinstance(info.get("ipv4_secondaries"), list) else []
        addresses.extend(a.get("address") for a in secondaries if isinstance(a, dict) and a.get("address"))
        if addresses:
            result[str(info.get("device", name))] = addresses
    return result


def node_interface(facts, node_ip="", explicit=""):
    """The interface a Ray node's traffic uses, from collect_facts()' network facts (their ansible_ prefix or not):
    ``explicit`` (ray_node_interface) when given, else the one holding ``node_ip`` (ray_node_ip, by
    interface_addresses(), as the fleet model finds it), else "" (the probe then reads the default route's).
    Preflight's probe needs it before the model exists, for the firewalld zone of the node's traffic."""
    if explicit:
        return explicit
    if not node_ip or not isinstance(facts, dict):
        return ""
    plain = dict((key[len("ansible_") :] if key.startswith("ansible_") else key, value) for key, value in facts.items())
    return next((device for device, addresses in interface_addresses(plain).items() if node_ip in addresses), "")


def _records(text, width):
    """The fields of each line of /etc/passwd or /etc/group (width fields), without comments and NIS entries."""
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) == width and fields[0] and fields[0][0] not in "+-#":
            yield fields


def local_accounts(passwd_text, group_text, exists=None):
    """The local users and groups, from the texts of /etc/passwd and /etc/group: {"users": {name: {"uid", "gid",
    "home", "shell", "home_exists"}}, "groups": {name: {"gid", "members"}}}. exists(path) says whether a home is
    there (os.path.exists by default). A line whose ids are not numbers is left out."""
    import os

    exists = exists or os.path.exists
    users, groups = {}, {}
    for name, _password, uid, gid, _gecos, home, shell in _records(passwd_text, 7):
        try:
            uid, gid = int(uid), int(gid)
        except ValueError:
            continue
        users[name] = {"uid": uid, "gid": gid, "home": home, "shell": shell, "home_exists": bool(home) and exists(home)}
    for name, _password, gid, members in _records(group_text, 4):
        try:
            gid = int(gid)
        except ValueError:
            continue
        groups[name] = {"gid": gid, "members": [m for m in members.split(",") if m]}
    return {"users": users, "groups": groups}


def read_accounts(passwd="/etc/passwd", group="/etc/group"):
    """local_accounts() of this host's files; an unreadable file gives no entries of its kind."""
    return local_accounts(read(passwd), read(group))


def account_in_place(accounts, user=None, group=None, home=None, shell=None, create_home=False, groups=()):
    """Whether ansible.builtin.group / ansible.builtin.user with these arguments would change nothing, judged from
    local_accounts(): the group exists (without user: the group module's check); the user exists with the given
    primary group, home, shell, a home that exists when create_home, and membership of groups (append). Anything not
    in the local files (a directory service's account) is not in place: the module then decides."""
    accounts = accounts if isinstance(accounts, dict) else {}
    all_groups = accounts.get("groups") if isinstance(accounts.get("groups"), dict) else {}
    if user is None:
        return group is not None and group in all_groups
    entry = (accounts.get("users") or {}).get(user) if isinstance(accounts.get("users"), dict) else None
    if not isinstance(entry, dict):
        return False
    if group is not None and (group not in all_groups or all_groups[group].get("gid") != entry.get("gid")):
        return False
    if home is not None and entry.get("home") != home:
        return False
    if shell is not None and entry.get("shell") != shell:
        return False
    if create_home and not entry.get("home_exists"):
        return False
    for name in groups or ():
        info = all_groups.get(name)
        if not isinstance(info, dict) or (user not in info.get("members", []) and info.get("gid") != entry.get("gid")):
            return False
    return True
