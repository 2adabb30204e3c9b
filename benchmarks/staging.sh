#!/usr/bin/env bash
# Time staging the vLLM venv from the wheelhouse on every Ray node of the converged sandbox at once (4 hosts):
# the python_venv module's step alone, with uv (warm cache: the state after the converge; BENCH_COLD=1 empties uv's
# cache first) and, with INSTALLER=pip, the pip fallback. Checks the staged venv's `pip freeze` equals the serving
# venv's. Needs the sandbox converged (molecule's `default` scenario); changes nothing that serves.
#   benchmarks/staging.sh                 # uv, warm cache
#   BENCH_COLD=1 benchmarks/staging.sh    # uv, empty cache (the first staging of a release on a node)
#   INSTALLER=pip benchmarks/staging.sh
#   LIMIT=ray-head benchmarks/staging.sh  # one node alone: a real node's time (the sandbox's 4 share 2 cores)
#   BENCH_UPGRADE=1 benchmarks/staging.sh # the upgrade's versions beside the serving venv, as an upgrade stages
#                                         # them: the bytecode of the files both venvs hold is reused
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks
export BENCH_COLD=${BENCH_COLD:-0} BENCH_UPGRADE=${BENCH_UPGRADE:-0} MOLECULE_PROJECT_DIRECTORY=$PWD
installer=${INSTALLER:-uv}
log=.cache/bench-staging-$installer.log
ansible-playbook -i inventories/sandbox benchmarks/staging.yml -e bench_installer="$installer" ${LIMIT:+--limit "$LIMIT"} \
  >"$log" 2>&1 \
  || { tail -n 40 "$log"; exit 1; }
step=$(grep -E '^Benchmark \| the timed step' "$log" | grep -oE '[0-9.]+s$' | tr -d s)
freeze=$(grep -oE 'same pip freeze \([0-9]+ distributions\)' "$log" | sort -u | paste -sd' ' || true)
[ "$BENCH_UPGRADE" = 1 ] && freeze="$(grep -oE 'msg: staged .+' "$log" | sed 's/^msg: //' | sort -u | head -n 1) beside the serving venv"
reused=$(grep -oE 'bytecode files reused: [0-9]+' "$log" | awk '{s += $4} END {print s + 0}')
hosts=$(grep -cE '^ok: \[.*\] => $|^changed: \[' <(sed -n '/the timed step/,/^TASK/p' "$log") || true)
printf 'vLLM venv staged on %s hosts at once with %s (cold cache: %s): %s s; %s; bytecode files reused on all hosts: %s; commit %s, %s, %s cores\n' \
  "$hosts" "$installer" "$BENCH_COLD" "$step" "${freeze:-pip freeze NOT compared}" "$reused" "$(git rev-parse --short HEAD)" \
  "$(date -u +%F)" "$(nproc)"
