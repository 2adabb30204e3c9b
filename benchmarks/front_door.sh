#!/usr/bin/env bash
# The fleet's front door on simulated backends (issue 56): HAProxy routing by the request's model to one vllm-router
# per model, against vllm-router's multi-model mode (--enable-igw), both against the router alone. Prints what a
# client sees (the model list, an unknown model's answer, whether a model one cluster serves always reaches it) and
# the latency and throughput each adds. No sandbox needed: vllm-router and aiohttp from the sandbox's router
# wheelhouse (the venv of benchmarks/router_policy.sh), HAProxy from Debian's package unpacked under .cache
# (nothing installed or started as a service).
#   [SECONDS_EACH=20] [TOKENS=16] benchmarks/front_door.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-20}
TOKENS=${TOKENS:-16}
venv=$(bash scripts/router-venv.sh)
version=$("$venv/bin/pip" show vllm-router | awk '/^Version:/ {print $2}')
dir=.cache/haproxy
[ -x "$dir/x/usr/sbin/haproxy" ] || bash scripts/debian-unpack.sh "$dir" haproxy liblua5.3-0 libopentracing-c-wrapper0 libopentracing1
export LD_LIBRARY_PATH="$PWD/$dir/x/usr/lib/x86_64-linux-gnu"
echo "vllm-router $version, $("$dir/x/usr/sbin/haproxy" -v | head -n 1 | cut -d' ' -f1-3), $(nproc) CPUs," \
  "$TOKENS tokens a request, ${SECONDS_EACH} s a measurement, $(date -u +%F), $(git rev-parse --short HEAD)"
"$venv/bin/python" benchmarks/front_door.py --router "$venv/bin/vllm-router" --haproxy "$dir/x/usr/sbin/haproxy" \
  --seconds "$SECONDS_EACH" --tokens "$TOKENS" --json .cache/front-door.json
