# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What the fleet model's builders share: the fleet being built (inputs, resolved settings, problems, what each
builder has published so far) and message helpers."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.listen_address import listen_url
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.settings import resolve


def join(items):
    return ", ".join(str(i) for i in items)


def variants(values):
    """'a on h1, h2; b on h3' for {host: value}."""
    by_value = {}
    for host, value in values.items():
        by_value.setdefault(repr(value) if isinstance(value, (dict, list)) else str(value), []).append(host)
    return "; ".join("%s on %s" % (value, join(sorted(hosts))) for value, hosts in sorted(by_value.items()))


def listen(host, port):
    """HOST:PORT as listen_url reads it (IPv6 in brackets; no host: every interface)."""
    host = "" if host is None else str(host)
    return "%s:%s" % ("[%s]" % host if ":" in host and not host.startswith("[") else host, port)


def url(host, port, any_host):
    """The URL clients reach a server listening on HOST:PORT at ("" when the port is unusable: a problem names
    it)."""
    if port is None:
        return ""
    try:
        return listen_url(listen(host, port), any_host)
    except ValueError:
        return ""


class Fleet:
    """The fleet being built: the inventory's groups, each host's resolved settings and facts, the problems found,
    and the parts built so far (nodes, clusters, monitoring, routers, addresses, ports)."""

    def __init__(self, heads, workers, hosts, defaults, monitoring=(), routers=()):
        self.hosts = hosts if isinstance(hosts, dict) else {}
        self.defaults = defaults or {}
        self.heads = [h for h in heads or [] if isinstance(h, str)]
        self.workers = [h for h in workers or [] if isinstance(h, str)]
        self.monitoring = [h for h in monitoring or [] if isinstance(h, str)]
        self.routers = [h for h in routers or [] if isinstance(h, str)]
        self.names = list(dict.fromkeys(self.heads + self.workers + self.monitoring + self.routers))
        self.settings = resolve(self.hosts, self.defaults, self.names)
        self.problems = []
        self.nodes = {}
        self.clusters = {}
        self.addresses = {}
        self.ports = {}
        self.router_model = {
            "hosts": self.routers,
            "addresses": {},
            "models": {},
            "door": {"port": 0, "models": [], "urls": {}, "metrics_port": 0, "metrics_urls": {}},
        }

    def info(self, host):
        info = self.hosts.get(host)
        return info if isinstance(info, dict) else {}

    def facts(self, host):
        facts = self.info(host).get("facts")
        return facts if isinstance(facts, dict) else {}

    def setting(self, host, key):
        return self.settings.get(host, {}).get(key, self.defaults.get(key))

    def address(self, host):
        """Where others reach a host: its node address when it is a Ray node, else ansible_host, else its name."""
        if host in self.nodes:
            return self.nodes[host]["ip"]
        ansible_host = self.info(host).get("ansible_host")
        return ansible_host if isinstance(ansible_host, str) and ansible_host else host
