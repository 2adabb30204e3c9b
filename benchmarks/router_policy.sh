#!/usr/bin/env bash
# The routing policy of the fleet's front door on simulated backends (issue 56): vllm-router started with the router
# role's arguments in front of OpenAI-shaped backends that use no CPU to answer (each a fixed number of slots and a
# fixed time per output token: its capacity is exact), on this machine's loopback. For each backend mix and policy:
# throughput at saturation against the sum of the backends' capacities (target >= 0.9) and p99 latency at half load
# against the fastest backend alone (target <= 1.2x). No sandbox needed: vllm-router and aiohttp come from the
# sandbox's router wheelhouse (scripts/sandbox-prereqs.sh builds it) into .cache/router-policy-venv.
#   [POLICIES="power_of_two round_robin cache_aware"] [SECONDS_EACH=20] [TOKENS=16] \
#     [MIXES="1:1=8x10,8x10 1:4=8x10,8x40"] benchmarks/router_policy.sh
# A mix is NAME=SLOTSxMS,...: per backend, its slots and its milliseconds per output token.
set -euo pipefail
cd "$(dirname "$0")/.."
POLICIES=${POLICIES:-power_of_two round_robin cache_aware}
SECONDS_EACH=${SECONDS_EACH:-20}
TOKENS=${TOKENS:-16}
MIXES=${MIXES:-1:1=8x10,8x10 1:4=8x10,8x40}
venv=$(bash scripts/router-venv.sh)
version=$("$venv/bin/pip" show vllm-router | awk '/^Version:/ {print $2}')
args=()
for mix in $MIXES; do args+=(--mix "$mix"); done
echo "vllm-router $version, $(nproc) CPUs, $TOKENS tokens a request, ${SECONDS_EACH} s a measurement, $(date -u +%F), $(git rev-parse --short HEAD)"
"$venv/bin/python" benchmarks/router_policy.py --router "$venv/bin/vllm-router" --policies "$POLICIES" \
  --seconds "$SECONDS_EACH" --tokens "$TOKENS" --json .cache/router-policy.json "${args[@]}"
