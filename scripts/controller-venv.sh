#!/usr/bin/env bash
# Create .venv with the locked controller tooling (requirements.lock, from pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.lock-sha
want=$(sha256sum requirements.lock | cut -c1-16)
if [ -x .venv/bin/ansible-playbook ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
# Debian and Ubuntu ship venv's pip bootstrap (ensurepip) apart from python3, in python3-venv: a minimal install has
# python3 without it, and `python3 -m venv` fails there. Install it where we may (root, apt); say what to do elsewhere.
if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "controller venv: installing python3 and python3-venv from the distribution (ensurepip missing)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  else
    echo "controller venv: python3 with its venv module and ensurepip is needed; on Debian or Ubuntu run" \
      "'apt-get install python3-venv' as root, then run this again" >&2
    exit 1
  fi
fi
rm -rf .venv
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
