#!/usr/bin/env bash
# Time the first converge of the sandbox fleet (fresh hosts) and a no-op re-run,
# and print both with their changed counts. Uses molecule's `default` scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/controller-venv.sh
bash scripts/sandbox-prereqs.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
RAYVLLM_HOST_IMAGE=$(cat .cache/host-image)
export RAYVLLM_HOST_IMAGE
molecule destroy -s default >/dev/null 2>&1
molecule create -s default >/dev/null 2>&1
run() {
  local log=$1 t0 t1
  t0=$(date +%s.%N)
  molecule converge -s default >"$log" 2>&1
  t1=$(date +%s.%N)
  local changed
  changed=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -oE 'changed=[0-9]+' | cut -d= -f2 | paste -sd+ | bc)
  printf '%-22s %6.1f s   changed tasks (all hosts): %s\n' "$2" "$(echo "$t1 - $t0" | bc)" "$changed"
}
echo "sandbox: 3 hosts (1 head, 2 workers), Ray $(awk -F'"' '/^ray_version:/ {print $2}' inventories/sandbox/group_vars/all.yml), $(nproc) cores"
run .cache/bench-converge-1.log "first converge"
run .cache/bench-converge-2.log "no-op re-run"
