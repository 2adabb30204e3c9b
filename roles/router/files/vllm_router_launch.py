# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Start vllm-router from a rayvllm.fleet router config (/etc/vllm-router/<model>.json).

The key the router uses on its own calls to the backends comes from the environment
(VLLM_ROUTER_API_KEY, the unit's root-only EnvironmentFile), never from the command line
(`systemctl show` and process listings would show it). Backends a playbook holds out of
rotation (a failed upgrade gate) are left out of --worker-urls, so a restart of the router
does not put them back.

vllm-router 0.1.17 refuses to start with power_of_two and fewer than two workers ("Power-of-two policy requires at
least 2 workers"; systemd would restart it every 2 s, the model unreachable): a model one cluster serves, or one of
two backends held out, starts with round_robin instead, the same choice among one backend.
"""

import os
import sys
import time

try:  # installed in /usr/local/lib/rayvllm beside vllm_router_health.py, whose hold files this reads
    from vllm_router_health import hold_of, hold_path, load_json
except ImportError:  # in the collection (unit tests)
    from ansible_collections.rayvllm.fleet.plugins.module_utils.vllm_router_health import hold_of, hold_path, load_json


def worker_urls(config, state_dir, now):
    """The backends' URLs, less those a hold file keeps out of rotation (as vllm-router-health reads them)."""
    return [
        backend["url"]
        for backend in config["backends"]
        if not hold_of(load_json(hold_path(state_dir, config["instance"], backend["cluster"]), None), now)[0]
    ]


def with_workable_policy(args, urls):
    """ARGS with --policy round_robin instead of power_of_two when fewer than two URLS are in rotation."""
    if len(urls) >= 2 or "--policy" not in args:
        return args
    at = args.index("--policy") + 1
    if at < len(args) and args[at] == "power_of_two":
        print("vllm-router: %d backend(s) in rotation, power_of_two needs 2: round_robin instead" % len(urls))
        return args[:at] + ["round_robin"] + args[at + 1 :]
    return args


def main():
    config_path, state_dir = sys.argv[1], sys.argv[2]
    config = load_json(config_path, None)
    if not config:
        sys.exit("vllm-router: cannot read %s" % config_path)
    args = list(config["args"])
    urls = worker_urls(config, state_dir, time.time())
    args = with_workable_policy(args, urls)
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
