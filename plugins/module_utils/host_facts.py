# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What roles/fleet_facts reads on every host once per run, in one module call (rayvllm.fleet.host_facts): a few of
Ansible's own fact collectors, and the names of the installed packages from dpkg's database (read as a file: no
dpkg-query, no shell, no apt cache)."""

from __future__ import annotations

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


def collect_facts(module, timeout=10):
    """Ansible's facts of FACT_SUBSETS (the keys setup returns, with their ansible_ prefix). Only these collectors
    run (setup's minimal subset runs about a dozen more). Every collector module is still imported and shipped:
    ansible.module_utils.facts' __init__ imports them all. The network facts are Linux's (preflight refuses any
    other OS)."""
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
    texts = []
    for path in (passwd, group):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        except OSError:
            texts.append("")
    return local_accounts(*texts)


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
