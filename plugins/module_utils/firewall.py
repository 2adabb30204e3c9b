# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall: an nftables rule set from a host's exposure in the fleet model.

Default deny on input, in a table of its own (``inet rayvllm_fleet``, replaced atomically on every
load, other tables untouched). Accepted: replies, loopback, ICMP, the SSH port Ansible uses, every port
from the members of the host's Ray cluster (Ray, torch.distributed, NCCL and vLLM open ports beyond the
pinned ones), and each service's port from its sources. Plain Python; the unit tests render and check it.
"""

import ipaddress

TABLE = "rayvllm_fleet"


def _network(value):
    return ipaddress.ip_network(str(value).strip(), strict=False)


def _sources(values, label, problems):
    """(IPv4 networks, IPv6 networks) as strings; a value that is not an address or network is a problem."""
    v4, v6 = [], []
    for value in values or []:
        try:
            net = _network(value)
        except ValueError:
            problems.append(
                "%s: %r is not an IP address or network; the host firewall needs addresses (set ansible_host or "
                "ray_node_ip to an IP, or give a CIDR such as 10.0.0.0/8)" % (label, value)
            )
            continue
        (v4 if net.version == 4 else v6).append(net)
    # nftables refuses overlapping elements in one set: 10.0.0.0/24 and 10.0.0.5 become 10.0.0.0/24.
    return tuple(
        [str(n.network_address) if n.num_addresses == 1 else str(n) for n in ipaddress.collapse_addresses(nets)]
        for nets in (v4, v6)
    )


def _set(items):
    return items[0] if len(items) == 1 else "{ %s }" % ", ".join(str(i) for i in items)


def _accept(lines, v4, v6, match, comment):
    """Accept MATCH from the sources; 0.0.0.0/0 or ::/0 among them: from anywhere."""
    match = (" " + match) if match else ""
    comment = " comment " + _quote(comment)
    if "0.0.0.0/0" in v4 and "::/0" in v6:
        lines.append(("%s accept%s" % (match, comment)).lstrip())
        return
    if v4:
        source = "meta nfproto ipv4" if "0.0.0.0/0" in v4 else "ip saddr %s" % _set(v4)
        lines.append("%s%s accept%s" % (source, match, comment))
    if v6:
        source = "meta nfproto ipv6" if "::/0" in v6 else "ip6 saddr %s" % _set(v6)
        lines.append("%s%s accept%s" % (source, match, comment))


def _quote(text):
    return '"%s"' % str(text).replace('"', "'")[:120]


def _ports(ports):
    return _set([str(p) for p in sorted(set(ports), key=lambda p: int(str(p).split("-")[0]))])


def ruleset(host, exposure, admin_cidrs=(), ssh_ports=(22,), ssh_cidrs=("0.0.0.0/0", "::/0"), extra_rules=()):
    """(nft rule set text, problems) for one host.

    exposure: the fleet model's firewall entry of the host ({"members", "services"}); admin_cidrs: networks
    that reach the admin services (dashboard, Prometheus, Grafana); ssh_ports/ssh_cidrs: Ansible's way in;
    extra_rules: [{"ports": [..], "sources": [..], "proto": "tcp"|"udp", "comment": str}].
    """
    problems = []
    lines = [
        "ct state established,related accept",
        "ct state invalid drop",
        'iif "lo" accept',
        'meta l4proto { 1, 58 } accept comment "ICMP, ICMPv6: ping, path MTU, IPv6 neighbour discovery"',
        'ip6 saddr fe80::/10 udp sport 547 udp dport 546 accept comment "DHCPv6 replies"',
    ]
    ssh_v4, ssh_v6 = _sources(ssh_cidrs, "firewall_ssh_cidrs", problems)
    ports = [int(p) for p in ssh_ports if str(p).isdigit()]
    if ports:
        _accept(lines, ssh_v4, ssh_v6, "tcp dport %s" % _ports(ports), "SSH: Ansible's connection")
    members = exposure.get("members") or []
    m4, m6 = _sources(members, "cluster members of %s" % host, problems)
    if m4 or m6:
        _accept(lines, m4, m6, "", "Ray cluster members: every port")
    admin_v4, admin_v6 = _sources(admin_cidrs, "firewall_admin_cidrs", problems)
    for service in exposure.get("services") or []:
        v4, v6 = _sources(service.get("sources"), "sources of %s on %s" % (service["name"], host), problems)
        if service.get("admins"):
            v4, v6 = _sources(v4 + admin_v4 + v6 + admin_v6, "firewall_admin_cidrs", problems)
        if not (v4 or v6):
            lines.append("# %s (port %s): cluster members only" % (service["name"], _ports(service["ports"])))
            continue
        _accept(lines, v4, v6, "%s dport %s" % (service.get("proto", "tcp"), _ports(service["ports"])), service["name"])
    for index, rule in enumerate(extra_rules or []):
        label = "firewall_extra_rules[%d]" % index
        proto = rule.get("proto", "tcp") if isinstance(rule, dict) else None
        if not isinstance(rule, dict) or proto not in ("tcp", "udp") or not rule.get("ports"):
            problems.append("%s: give ports (a list), sources (CIDRs) and optionally proto tcp|udp" % label)
            continue
        bad = [p for p in rule["ports"] if not str(p).replace("-", "", 1).isdigit()]
        if bad:
            problems.append("%s: %s are not ports or port ranges (e.g. 9000 or 9000-9010)" % (label, bad))
            continue
        v4, v6 = _sources(rule.get("sources") or ["0.0.0.0/0", "::/0"], label, problems)
        _accept(lines, v4, v6, "%s dport %s" % (proto, _ports(rule["ports"])), rule.get("comment") or label)
    lines.append('counter drop comment "everything else"')
    text = (
        "#!/usr/sbin/nft -f\n"
        "# Host firewall of %s (rayvllm.fleet, roles/firewall): generated, do not edit.\n"
        "# Loading it replaces table inet %s atomically and leaves every other table alone.\n"
        "table inet %s\n"
        "delete table inet %s\n"
        "table inet %s {\n"
        "\tchain input {\n"
        "\t\ttype filter hook input priority filter; policy drop;\n"
        "%s"
        "\t}\n"
        "}\n"
    ) % (host, TABLE, TABLE, TABLE, TABLE, "".join("\t\t%s\n" % line for line in lines))
    return text, problems
