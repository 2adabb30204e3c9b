# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The firewall role's input checks (roles/firewall/tasks/validate.yml): its addresses and rules, and the
firewalls the host runs (from rayvllm.fleet.host_probe)."""

import ipaddress

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import truthy
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.firewall import openings
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import (
    integer,
    is_sequence,
    mapping,
    sequence,
)


def ssh_openings(values, connection):
    """(SSH ports, SSH sources): firewall_ssh_port and firewall_ssh_cidrs, plus always Ansible's own connection
    (SSH_CONNECTION: client address, client port, server address, server port)."""
    connection = connection if is_sequence(connection) and len(connection) == 4 else []
    ports = [integer(values.get("firewall_ssh_port"))] + ([integer(connection[3])] if connection else [])
    cidrs = values.get("firewall_ssh_cidrs") if is_sequence(values.get("firewall_ssh_cidrs")) else []
    return ports, list(cidrs) + ([connection[0]] if connection else [])


def everyone_networks(cidrs):
    """The entries of ``cidrs`` (firewall_admin_cidrs) that are a network of every address (prefix length 0)."""
    found = []
    for cidr in cidrs if is_sequence(cidrs) else []:
        try:
            if ipaddress.ip_network(str(cidr).strip(), strict=False).prefixlen == 0:
                found.append(str(cidr).strip())
        except ValueError:
            continue  # named by openings() as not a network
    return found


def problems(values, host, model, context):
    """context: ``probe`` (rayvllm.fleet.host_probe's result on the host) and ``connection`` (Ansible's
    SSH_CONNECTION, split)."""
    v, found = values, []
    enabled = truthy(v.get("firewall_enabled"))
    probe = context.get("probe") if isinstance(context.get("probe"), dict) else {}
    running = sequence(probe.get("firewalls"))
    if enabled:
        exposure = (model.get("firewall") or {}).get(host) or {}
        ssh_ports, ssh_cidrs = ssh_openings(v, context.get("connection"))
        _found, bad = openings(
            host,
            exposure,
            v.get("firewall_admin_cidrs") or [],
            ssh_ports,
            ssh_cidrs,
            v.get("firewall_extra_rules") or [],
        )
        if bad:
            found.append("Host firewall of %s: %s" % (host, " | ".join(bad)))
        ssh_port = v.get("firewall_ssh_port")
        if isinstance(ssh_port, bool) or not str(ssh_port).isdigit() or not 1 <= int(str(ssh_port)) <= 65535:
            found.append(
                "firewall_ssh_port on %s is '%s': give the port number alone, 1-65535 (e.g. 22; the rule is tcp)."
                % (host, ssh_port)
            )
        everyone = everyone_networks(v.get("firewall_admin_cidrs"))
        if everyone and not truthy(v.get("firewall_admin_open_to_all")):
            found.append(
                "firewall_admin_cidrs on %s holds %s, every address: the Ray dashboard (which submits jobs: code runs "
                "on the cluster), Prometheus and Alertmanager (no login) and Grafana would answer anyone who reaches "
                "the host. List the operators' networks instead, or set firewall_admin_open_to_all: true where "
                "another layer (a VPN, a cloud security group) already limits who reaches it."
                % (host, ", ".join(everyone))
            )
        if len(running) > 1:
            found.append(
                "%s runs both ufw and firewalld, which fight over the same rules. Stop one of them (systemctl disable "
                "--now firewalld, or ufw disable), then run again." % host
            )
        if running == ["firewalld"]:
            zones = sequence(probe.get("firewalld_zones"))
            accepting = [z for z in zones if isinstance(z, dict) and z.get("target") == "ACCEPT"]
            if accepting:
                found.append(
                    "firewalld on %s puts the traffic of %s, whose target ACCEPT lets every port in: the openings of "
                    "this role would restrict nothing. Bind the interface to a zone that rejects what it does not "
                    "allow (firewall-cmd --permanent --zone=public --change-interface=IFACE, or "
                    "--set-default-zone=public), or set firewall_enabled: false for this host."
                    % (host, ", ".join("%s in zone %s" % (z.get("interface"), z.get("zone")) for z in accepting))
                )
    return found


def backend(probe):
    """What writes the rules: ufw or firewalld where the host already runs it, else nftables."""
    running = sequence(mapping(probe).get("firewalls"))
    return "ufw" if "ufw" in running else "firewalld" if "firewalld" in running else "nftables"
