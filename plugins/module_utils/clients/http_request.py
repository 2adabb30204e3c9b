# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Send a ``urllib.request.Request`` with Ansible's ``open_url``: how the modules' HTTP clients talk.

``ray_state`` and ``vllm_client`` build their requests with urllib (their unit tests pass openers that
read them) and send them with this: proxies from the environment and certificates checked, as every
Ansible module sends HTTP, with urllib's ``HTTPError`` and ``URLError`` raised as urllib raises them.
"""

from __future__ import annotations


def open_request(request, timeout):
    """Send ``request`` and return the response; an HTTP error status raises ``HTTPError``.

    ``~/.netrc`` is not read: open_url would put its credentials in place of the bearer token the
    request carries.
    """
    # Imported here, not above: the controller's filter plugins import the modules that build on this one
    # (fleet_status, ray_serve, the input checks) only to compare and render, and ansible.module_utils.urls
    # (with http.client, email and cryptography) takes ~0.2 s to import (python -X importtime).
    from ansible.module_utils.urls import open_url

    return open_url(
        request.full_url,
        data=request.data,
        headers=dict(request.header_items()),
        method=request.get_method(),
        timeout=timeout,
        use_netrc=False,
    )


def read_response(request, timeout, opener=None):
    """Send ``request`` with ``opener`` (default: ``open_request``) and return the body of its response.

    The response is closed whatever happens; errors are raised as urllib raises them (``HTTPError``,
    ``URLError``), for each caller to name in its own words.
    """
    return read_status_and_body(request, timeout, opener)[1]


def read_status_and_body(request, timeout, opener=None):
    """``(HTTP status, body)`` of ``request``'s response, as ``read_response`` sends it (same errors)."""
    response = (opener or open_request)(request, timeout=timeout)
    try:
        status = getattr(response, "status", None) or getattr(response, "getcode", lambda: 200)()
        return int(status), response.read()
    finally:
        response.close()
