# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The front door's HAProxy files on one router host (logic in module_utils/planners/front_door.py and
door_tenants.py)."""

from ansible.errors import AnsibleFilterError


def front_door(routers, host, map_path, max_body_bytes=1048576, timeout_s=600, tenancy=None, lua_path=None):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.front_door import LUA_PATH, door_files

    try:
        return door_files(
            routers, host, map_path, max_body_bytes=int(max_body_bytes), timeout_s=int(timeout_s), tenancy=tenancy,
            lua_path=lua_path or LUA_PATH,
        )  # fmt: skip
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("front_door: %s" % exc)


def door_tenant_map(tenants, served):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.door_tenants import tenant_map

    return tenant_map(tenants, served)


def door_keys_map(keys):
    from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.door_tenants import keys_map

    try:
        return keys_map(keys)
    except ValueError as exc:
        raise AnsibleFilterError("door_keys_map: %s" % exc)


class FilterModule:
    def filters(self):
        return {"front_door": front_door, "door_tenant_map": door_tenant_map, "door_keys_map": door_keys_map}
