# shellcheck shell=bash
# Sourced by the benchmarks from the repository root: the controller venv, the sandbox prerequisites
# (Docker engine, host image, wheelhouse) and the environment molecule needs.
bash scripts/controller-venv.sh
bash scripts/sandbox-prereqs.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
RAYVLLM_HOST_IMAGE=$(cat .cache/host-image)
export RAYVLLM_HOST_IMAGE

# A fresh sandbox fleet, converged (its log in .cache/bench-<name>-converge.log) and destroyed when the
# benchmark exits; with REUSE=1 the fleet molecule's `default` scenario already converged (kept).
sandbox_fleet() {
  if [ "${REUSE:-0}" != 1 ]; then
    trap 'molecule destroy -s default >/dev/null 2>&1 || true' EXIT
    molecule destroy -s default >/dev/null 2>&1
    molecule create -s default >/dev/null 2>&1
    molecule converge -s default >".cache/bench-$1-converge.log" 2>&1
  fi
}

# The inventory molecule wrote for the `default` scenario: the one in its newest ~/.ansible/tmp directory.
molecule_inventory() {
  local dir newest=""
  for dir in "$HOME"/.ansible/tmp/molecule.*.default; do
    if [ -z "$newest" ] || [ "$dir" -nt "$newest" ]; then newest=$dir; fi
  done
  echo "$newest/inventory/ansible_inventory.yml"
}
