# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The URL a server is reached at, from its listen address."""

from ansible.errors import AnsibleFilterError


def listen_url(listen, any_host="127.0.0.1", scheme="http"):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.listen_address import listen_url as _listen_url

    try:
        return _listen_url(listen, any_host=any_host, scheme=scheme)
    except ValueError as exc:
        raise AnsibleFilterError("listen_url: %s" % exc)


class FilterModule:
    def filters(self):
        return {"listen_url": listen_url}
