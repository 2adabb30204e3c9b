# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""systemd environment-file lines from a mapping (quoted and escaped)."""

from ansible.errors import AnsibleFilterError


def env_file(variables):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.env_file import env_file as _env_file

    try:
        return _env_file(variables)
    except ValueError as exc:
        raise AnsibleFilterError("env_file: %s" % exc)


class FilterModule:
    def filters(self):
        return {"env_file": env_file}
