# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The URL other programs reach a server at, from the address it listens on.

Plain Python, standard library only; used by the filter ``rayvllm.fleet.listen_url``.
"""

from __future__ import annotations

# Addresses that mean "every interface": a client must use a concrete address instead.
ANY = ("", "0.0.0.0", "::", "[::]", "*")


def listen_url(listen, any_host="127.0.0.1", scheme="http"):
    """``"0.0.0.0:9090"`` -> ``"http://127.0.0.1:9090"`` (or ``any_host``); a concrete host is kept.

    ``listen`` is ``HOST:PORT`` (``[v6]:PORT`` for IPv6) or ``:PORT``.
    """
    host, sep, port = str(listen).strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("%r is not HOST:PORT (e.g. 0.0.0.0:9090)" % (listen,))
    if host in ANY:
        host = str(any_host)
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
    return "%s://%s:%s" % (scheme, host, port)
