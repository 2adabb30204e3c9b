# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The host firewall: an nftables rule set (or ufw rules) from a host's exposure in the fleet model.

Default deny on input, in a table of its own (``inet rayvllm_fleet``, replaced atomically on every
load, other tables untouched). Accepted: replies, loopback, ICMP, the SSH port Ansible uses, every port
from the members of the host's Ray cluster (Ray, torch.distributed, NCCL and vLLM open ports beyond the
pinned ones), and each service's port from its sources. On a host that already runs ufw the same
openings become ufw rules (``ufw_plan``) and ufw stays the only firewall; on one that runs firewalld they
become the rich rules of a firewalld policy of ours (``firewalld_xml``), and firewalld stays the only one.
Plain Python; the unit tests render and check it.
"""

import binascii
import ipaddress
import re

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import kind, shown

TABLE = "rayvllm_fleet"
UFW_COMMENT = "rayvllm: "  # every ufw rule this role writes carries it; rules without it are the operator's
SSH_COMMENT = "SSH: Ansible's connection"
# The firewalld policy this role owns (/etc/firewalld/policies/<name>.xml; firewalld allows 17 characters).
FIREWALLD_POLICY = "rayvllm-fleet"


def _network(value):
    return ipaddress.ip_network(str(value).strip(), strict=False)


def _sources(values, label, problems):
    """(IPv4 networks, IPv6 networks) as strings; a value that is not an address or network is a problem."""
    v4, v6 = [], []
    if isinstance(values, str) or not isinstance(values, (list, tuple, type(None))):
        problems.append(
            "%s must be a list of addresses or networks, e.g. [10.0.0.0/8] (got %s, %s)"
            % (label, kind(values), shown(values))
        )
        return [], []
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


def _quote(text):
    return '"%s"' % str(text).replace('"', "'")[:120]


def _ports(ports):
    return _set([str(p) for p in sorted(set(ports), key=lambda p: int(str(p).split("-", maxsplit=1)[0]))])


def _accept(v4, v6, match, comment):
    """nft lines that accept MATCH from the sources; 0.0.0.0/0 or ::/0 among them: from anywhere."""
    match = (" " + match) if match else ""
    comment = " comment " + _quote(comment)
    if "0.0.0.0/0" in v4 and "::/0" in v6:
        return [("%s accept%s" % (match, comment)).lstrip()]
    lines = []
    if v4:
        source = "meta nfproto ipv4" if "0.0.0.0/0" in v4 else "ip saddr %s" % _set(v4)
        lines.append("%s%s accept%s" % (source, match, comment))
    if v6:
        source = "meta nfproto ipv6" if "::/0" in v6 else "ip6 saddr %s" % _set(v6)
        lines.append("%s%s accept%s" % (source, match, comment))
    return lines


def port_or_range(value):
    """Whether ``value`` is a port (1-65535) or a range of them written low-high."""
    if isinstance(value, bool):
        return False
    parts = str(value).split("-")
    if len(parts) > 2 or not all(part.isdigit() for part in parts):
        return False
    numbers = [int(part) for part in parts]
    return all(1 <= n <= 65535 for n in numbers) and numbers == sorted(numbers)


def openings(host, exposure, admin_cidrs=(), ssh_ports=(22,), ssh_cidrs=("0.0.0.0/0", "::/0"), extra_rules=()):
    """(openings, problems) for one host, whatever writes them (nftables or ufw).

    exposure: the fleet model's firewall entry of the host ({"members", "services"}); admin_cidrs: networks
    that reach the admin services (dashboard, Prometheus, Grafana); ssh_ports/ssh_cidrs: Ansible's way in;
    extra_rules: [{"ports": [..], "sources": [..], "proto": "tcp"|"udp", "comment": str}].
    Each opening: {"v4": [sources], "v6": [sources], "proto": "tcp"|"udp"|None, "ports": [..]|None,
    "comment": str}; proto and ports None: every port (the cluster members). A service only the cluster
    members reach has no opening of its own: {"v4": [], "v6": [], ...} (kept so the nft text can say so).
    """
    problems, result = [], []

    def add(v4, v6, proto, ports, comment):
        result.append({"v4": v4, "v6": v6, "proto": proto, "ports": ports, "comment": comment})

    ssh_v4, ssh_v6 = _sources(ssh_cidrs, "firewall_ssh_cidrs", problems)
    ports = [int(p) for p in ssh_ports if str(p).isdigit()]
    if ports and (ssh_v4 or ssh_v6):
        add(ssh_v4, ssh_v6, "tcp", ports, SSH_COMMENT)
    members = exposure.get("members") or []
    m4, m6 = _sources(members, "cluster members of %s" % host, problems)
    if m4 or m6:
        add(m4, m6, None, None, "Ray cluster members: every port")
    admin_v4, admin_v6 = _sources(admin_cidrs, "firewall_admin_cidrs", problems)
    for service in exposure.get("services") or []:
        v4, v6 = _sources(service.get("sources"), "sources of %s on %s" % (service["name"], host), problems)
        if service.get("admins"):
            v4, v6 = _sources(v4 + admin_v4 + v6 + admin_v6, "firewall_admin_cidrs", problems)
        add(v4, v6, service.get("proto", "tcp"), list(service["ports"]), service["name"])
    if not isinstance(extra_rules, (list, tuple, type(None))):
        problems.append(
            "firewall_extra_rules must be a list of rules (got %s, %s)" % (kind(extra_rules), shown(extra_rules))
        )
        extra_rules = []
    for index, rule in enumerate(extra_rules or []):
        label = "firewall_extra_rules[%d]" % index
        proto = rule.get("proto", "tcp") if isinstance(rule, dict) else None
        if (
            not isinstance(rule, dict)
            or proto not in ("tcp", "udp")
            or not isinstance(rule.get("ports"), (list, tuple))
            or not rule.get("ports")
            or not isinstance(rule.get("sources"), (list, tuple))
            or not rule.get("sources")
        ):
            problems.append(
                "%s: give ports (a list), sources (a list of CIDRs; [0.0.0.0/0, '::/0'] for anywhere) and optionally "
                "proto tcp|udp (got %s)" % (label, rule)
            )
            continue
        bad = [p for p in rule["ports"] if not port_or_range(p)]
        if bad:
            problems.append("%s: %s are not ports or port ranges of 1-65535 (e.g. 9000 or 9000-9010)" % (label, bad))
            continue
        v4, v6 = _sources(rule.get("sources"), label, problems)
        add(v4, v6, proto, list(rule["ports"]), rule.get("comment") or label)
    return result, problems


def ruleset(host, exposure, admin_cidrs=(), ssh_ports=(22,), ssh_cidrs=("0.0.0.0/0", "::/0"), extra_rules=()):
    """(nft rule set text, problems) for one host; the arguments are those of ``openings``."""
    found, problems = openings(host, exposure, admin_cidrs, ssh_ports, ssh_cidrs, extra_rules)
    return nft_text(host, found), problems


def nft_text(host, found):
    """The nft rule set of one host from its openings."""
    lines = [
        "ct state established,related accept",
        "ct state invalid drop",
        'iif "lo" accept',
        'meta l4proto { 1, 58 } accept comment "ICMP, ICMPv6: ping, path MTU, IPv6 neighbour discovery"',
        'ip6 saddr fe80::/10 udp sport 547 udp dport 546 accept comment "DHCPv6 replies"',
    ]
    for opening in found:
        v4, v6, ports = opening["v4"], opening["v6"], opening["ports"]
        if not (v4 or v6):
            lines.append("# %s (port %s): cluster members only" % (opening["comment"], _ports(ports)))
            continue
        match = "%s dport %s" % (opening["proto"], _ports(ports)) if ports else ""
        lines.extend(_accept(v4, v6, match, opening["comment"]))
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
    return text


def _ufw_comment(text):
    # ufw stores the comment hex-encoded but prints it between single quotes: keep it plain.
    return UFW_COMMENT + re.sub(r"[^A-Za-z0-9 :,./()\[\]_-]", "", str(text))[:100]


def ufw_rules(found):
    """community.general.ufw arguments of each rule for the openings: one rule per source and port, IPv4
    and IPv6 apart (so each matches one line of ufw's user rules files)."""
    rules = []
    for opening in found:
        for source in opening["v4"] + opening["v6"]:
            for port in list(dict.fromkeys(opening["ports"] or [None])):
                rule = {"rule": "allow", "direction": "in", "from_ip": source, "proto": opening["proto"] or "any"}
                if port is not None:
                    rule["to_port"] = str(port).replace("-", ":")
                rule["comment"] = _ufw_comment(opening["comment"])
                rules.append(rule)
    return rules


def _key(rule):
    """What ufw tells rules apart by (the comment is not part of it)."""
    return (rule["proto"], rule.get("to_port", "any"), rule["from_ip"])


def _ufw_user_rules(user_rules):
    """Every incoming allow rule of the text of /etc/ufw/user.rules and user6.rules (their ``### tuple ###``
    lines: action proto dport dst sport src direction [comment=hex]), as community.general.ufw arguments."""
    found = []
    for line in user_rules.splitlines():
        if not line.startswith("### tuple ### "):
            continue
        fields = line[len("### tuple ### ") :].split()
        comment = ""
        if fields and fields[-1].startswith("comment="):
            try:
                comment = binascii.unhexlify(fields.pop()[len("comment=") :]).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                continue
        if len(fields) != 7 or fields[0] != "allow" or fields[6] != "in" or fields[4] != "any":
            continue  # application profiles, interfaces, other actions: never ours
        if fields[3] not in ("0.0.0.0/0", "::/0"):
            continue  # to one address of the host only: narrower than ours
        rule = {"rule": "allow", "direction": "in", "from_ip": fields[5], "proto": fields[1]}
        if fields[2] != "any":
            rule["to_port"] = fields[2]
        rule["comment"] = comment
        found.append(rule)
    return found


def ufw_added(user_rules):
    """The rules this role wrote before (their comment starts with UFW_COMMENT), from ufw's user rules."""
    return [rule for rule in _ufw_user_rules(user_rules) if rule["comment"].startswith(UFW_COMMENT)]


def ufw_plan(found, user_rules):
    """{"rules": what this role should have on the host (to add first), "stale": rules it wrote before that
    are no longer wanted (to remove after), "disabled": what to remove when the firewall is left to the
    operator - every rule of ours but the SSH ones, since ufw stays on with its deny policy and would shut
    the controller out (the last two as community.general.ufw arguments with delete: true)}. Rules without
    our comment are the operator's: never removed, and an opening the operator already allows is not added
    again (ufw would only relabel their rule as ours, and a later removal of ours would take theirs, SSH
    included)."""
    theirs = {_key(rule) for rule in _ufw_user_rules(user_rules) if not rule["comment"].startswith(UFW_COMMENT)}
    rules = [rule for rule in ufw_rules(found) if _key(rule) not in theirs]
    # A rule of ours whose comment changed is relabelled by adding it again, not removed: the role adds the
    # wanted rules first and removes the stale ones after, so SSH is never without a rule in between.
    wanted = {_key(rule) for rule in rules}
    added = ufw_added(user_rules)
    stale = [dict(rule, delete=True) for rule in added if _key(rule) not in wanted]
    ssh = _ufw_comment(SSH_COMMENT)
    disabled = [dict(rule, delete=True) for rule in added if rule["comment"] != ssh]
    return {"rules": rules, "stale": stale, "disabled": disabled}


def _xml_comment(text):
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9 :,./()\[\]_'-]", "", str(text)))[:120]


def firewalld_rules(found):
    """The rich rules (firewalld's XML form) of the openings: one per source and port; a source of
    0.0.0.0/0 or ::/0 becomes a rule without source (of that family; without family when both)."""
    rules = []
    for opening in found:
        v4, v6 = opening["v4"], opening["v6"]
        if "0.0.0.0/0" in v4 and "::/0" in v6:
            sources = [(None, None)]
        else:
            sources = []
            for family, nets, anywhere in (("ipv4", v4, "0.0.0.0/0"), ("ipv6", v6, "::/0")):
                sources.extend([(family, None)] if anywhere in nets else [(family, net) for net in nets])
        for family, source in sources:
            for port in list(dict.fromkeys(opening["ports"] or [None])):
                rule = "<rule%s>" % (' family="%s"' % family if family else "")
                if source:
                    rule += '<source address="%s"/>' % source
                if port is not None:
                    rule += '<port port="%s" protocol="%s"/>' % (port, opening["proto"])
                rules.append(rule + "<accept/></rule>")
    return rules


def firewalld_xml(host, found):
    """The firewalld policy of one host from its openings: traffic from any zone to the host itself, target
    CONTINUE (what no rule of ours accepts goes on to the zones' own rules, the operator's)."""
    lines = []
    for opening in found:
        lines.append("<!-- %s -->" % _xml_comment(opening["comment"]))
        rules = firewalld_rules([opening])
        if not rules:
            lines[-1] = "<!-- %s (port %s): cluster members only -->" % (
                _xml_comment(opening["comment"]),
                ", ".join(str(p) for p in opening["ports"] or []),
            )
        lines.extend(rules)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        "<!-- Host firewall of %s (rayvllm.fleet, roles/firewall): generated, do not edit. -->\n"
        '<policy target="CONTINUE" priority="-100">\n'
        "  <short>rayvllm.fleet</short>\n"
        "  <description>Openings of the Ray and vLLM fleet on this host; everything else is left to the zones."
        "</description>\n"
        '  <ingress-zone name="ANY"/>\n'
        '  <egress-zone name="HOST"/>\n'
        "%s"
        "</policy>\n"
    ) % (_xml_comment(host), "".join("  %s\n" % line for line in lines))


def _firewalld_blocks(text):
    """{zone or policy name: set of its settings} from ``firewall-cmd --list-all-zones`` (or policies) output;
    interface bindings left out (NetworkManager binds them at runtime, and a reload keeps them)."""
    blocks, name = {}, None
    for line in text.splitlines():
        if line.strip() and not line[0].isspace():
            name = line.split(" (")[0].strip()
            blocks[name] = set()
        elif name and line.strip() and not line.strip().startswith("interfaces:"):
            blocks[name].add(line.strip())
    return blocks


def firewalld_state(text):
    """{"reload": whether firewalld must reload to load our policy as written (or drop it), "runtime_only":
    what such a reload would drop or apply besides ours} from the text of the role's firewalld probe:
    sections ``### runtime``, ``### permanent`` (every zone and policy) and ``### ours`` (``loaded`` or
    ``reload``). Empty text (firewalld not running): nothing to do."""
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
            sections[current] = []
        elif current:
            sections[current].append(line)
    runtime = _firewalld_blocks("\n".join(sections.get("runtime", [])))
    permanent = _firewalld_blocks("\n".join(sections.get("permanent", [])))
    differences = []
    for name in sorted(set(runtime) | set(permanent)):
        if name == FIREWALLD_POLICY:
            continue
        now, saved = runtime.get(name, set()), permanent.get(name, set())
        if now != saved:
            parts = []
            if now - saved:
                parts.append("only at runtime: " + "; ".join(sorted(now - saved)))
            if saved - now:
                parts.append("only in the permanent configuration: " + "; ".join(sorted(saved - now)))
            differences.append("%s (%s)" % (name, ", ".join(parts)))
    return {"reload": "reload" in sections.get("ours", []), "runtime_only": differences}
