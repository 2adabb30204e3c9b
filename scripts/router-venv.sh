#!/usr/bin/env bash
# The router benchmarks' venv (benchmarks/router_policy.sh, benchmarks/front_door.sh): vllm-router at the router
# role's version and aiohttp, from the sandbox's router wheelhouse (scripts/sandbox-prereqs.sh builds it), in
# .cache/router-policy-venv. Prints the venv's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk -F'"' '/^router_version:/ {print $2}' roles/router/defaults/main.yml)
venv=.cache/router-policy-venv
if [ ! -x "$venv/bin/vllm-router" ] || ! "$venv/bin/pip" show vllm-router 2>/dev/null | grep -qx "Version: $version"; then
  [ -d .cache/wheelhouse/router ] || bash scripts/sandbox-prereqs.sh >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-index --find-links .cache/wheelhouse/router "vllm-router==$version" aiohttp >&2
fi
echo "$venv"
