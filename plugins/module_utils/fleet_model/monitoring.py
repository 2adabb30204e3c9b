# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The monitoring hosts of the fleet model: where Prometheus, Grafana and the Alertmanagers are reached."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import values as checks
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.common import url


def build_monitoring(fleet):
    """{"host", "address", "prometheus_url", "prometheus_local_url", "prometheus_scrape_interval", "grafana_url",
    "addresses", "alertmanagers"}: the first monitoring host's URLs (empty without one), every monitoring host's
    address and every Alertmanager (HOST:PORT; every Prometheus sends its alerts to each). Ports come from
    fleet.ports (the services table, which names unusable values)."""
    model = {
        "host": "",
        "address": "",
        "prometheus_url": "",
        "prometheus_local_url": "",
        "prometheus_scrape_interval": "",
        "grafana_url": "",
        "addresses": {},
        "alertmanagers": [],
    }
    if not fleet.monitoring:
        return model
    first = fleet.monitoring[0]
    address = fleet.address(first)
    prometheus = checks.split_listen(fleet.setting(first, "prometheus_web_listen_address")) or (None, None)
    grafana_host = fleet.setting(first, "grafana_http_addr")
    grafana_host = grafana_host if isinstance(grafana_host, str) else None
    grafana_port = (fleet.ports.get(first, {}).get("grafana") or [None])[0]
    model.update(
        host=first,
        address=address,
        prometheus_url=url(prometheus[0], prometheus[1], address),
        # The same Prometheus as its own host (Grafana beside it) reaches it.
        prometheus_local_url=url(prometheus[0], prometheus[1], "127.0.0.1"),
        prometheus_scrape_interval=fleet.setting(first, "prometheus_scrape_interval"),
        grafana_url=url(grafana_host, grafana_port, address),
        addresses={h: fleet.address(h) for h in fleet.monitoring},
        alertmanagers=[
            "%s:%d" % (fleet.address(h), fleet.ports[h]["alertmanager"][0])
            for h in fleet.monitoring
            if fleet.ports.get(h, {}).get("alertmanager")
        ],
    )
    return model
