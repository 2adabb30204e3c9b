#!/usr/bin/env bash
# Create .venv with the locked controller tooling (requirements.lock, from pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.lock-sha
want=$(sha256sum requirements.lock | cut -c1-16)
if [ -x .venv/bin/ansible-playbook ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv .venv
# Drop this machine's pip-config noise from stderr without hiding pip's exit status.
quiet() { "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }
# uv (the version the hosts' venvs are built with) installs the lock in ~10 s where pip took ~70 s (fresh clones,
# pip's cache warm); pip is the fallback where uv cannot be installed.
uv_version=$(awk -F'"' '/^python_venv_uv_version:/ {print $2}' roles/python_venv/defaults/main.yml)
if quiet .venv/bin/pip install --quiet "uv==$uv_version"; then
  .venv/bin/uv pip install --quiet --python .venv/bin/python --upgrade pip -r requirements.lock
else
  echo "controller venv: uv $uv_version could not be installed; installing with pip" >&2
  quiet .venv/bin/pip install --quiet --upgrade pip
  quiet .venv/bin/pip install --quiet -r requirements.lock
fi
.venv/bin/ansible-playbook --version >/dev/null
echo "$want" >"$stamp"
echo "controller venv: ready ($(.venv/bin/ansible --version | sed -n 1p))"
