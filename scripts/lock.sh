#!/usr/bin/env bash
# Regenerate requirements.lock: resolve pyproject.toml's controller dependencies in a
# throw-away venv and pin everything that got installed, transitive packages included.
#   scripts/lock.sh        (then review `git diff requirements.lock` and commit it)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --upgrade pip
python3 - >"$tmp/requirements.in" <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
PY
"$tmp/venv/bin/pip" install --quiet -r "$tmp/requirements.in" 2> >(grep -v 'is ignored: it is neither' >&2)
"$tmp/venv/bin/pip" freeze --exclude-editable >requirements.lock
echo "requirements.lock: $(grep -vc '^#' requirements.lock) packages pinned"
