# Sourced by the benchmarks from the repository root: the controller venv, the sandbox prerequisites
# (Docker engine, host image, wheelhouse) and the environment molecule needs.
bash scripts/controller-venv.sh
bash scripts/sandbox-prereqs.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
RAYVLLM_HOST_IMAGE=$(cat .cache/host-image)
export RAYVLLM_HOST_IMAGE
