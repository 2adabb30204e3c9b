#!/usr/bin/env python3
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Start vllm-router from a rayvllm.fleet router config (/etc/vllm-router/<model>.json).

The key the router uses on its own calls to the backends comes from the environment
(VLLM_ROUTER_API_KEY, the unit's root-only EnvironmentFile), never from the command line
(`systemctl show` and process listings would show it). Backends a playbook holds out of
rotation (a failed upgrade gate) are left out of --worker-urls, so a restart of the router
does not put them back.
"""

import json
import os
import sys
import time


def worker_urls(config, state_dir, now):
    out = []
    for backend in config["backends"]:
        path = os.path.join(state_dir, "holds", "%s@%s.json" % (config["instance"], backend["cluster"]))
        try:
            with open(path) as handle:
                until = float(json.load(handle).get("until") or 0)
        except (OSError, ValueError, AttributeError, TypeError):
            out.append(backend["url"])
            continue
        if until and until <= now:
            out.append(backend["url"])
    return out


def main():
    config_path, state_dir = sys.argv[1], sys.argv[2]
    with open(config_path) as handle:
        config = json.load(handle)
    args = list(config["args"])
    urls = worker_urls(config, state_dir, time.time())
    if urls:
        args += ["--worker-urls"] + urls
    key = os.environ.pop("VLLM_ROUTER_API_KEY", "")
    if key:
        args += ["--api-key", key]
    from vllm_router.launch_router import main as launch

    sys.argv = ["vllm-router"] + args
    return launch()


if __name__ == "__main__":
    sys.exit(main())
