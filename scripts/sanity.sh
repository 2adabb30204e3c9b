#!/usr/bin/env bash
# ansible-test sanity on this collection, with the locked ansible-core, on this machine's python3:
#   scripts/sanity.sh [ansible-test sanity options, e.g. --test pylint]
# Accepted exceptions, each with its reason: tests/sanity/ignore-<ansible-core major.minor>.txt.
#
# ansible-test wants the collection at <dir>/ansible_collections/rayvllm/fleet and reads the files git
# lists there, so the files of this checkout that git would list (tracked, and untracked ones not
# ignored; uncommitted changes included) are copied to .cache/sanity/ansible_collections/rayvllm/fleet,
# a git repository of its own (without one, ansible-test would ask this checkout's git, which ignores
# .cache/). Its venvs (one per test, ~/.ansible/test/venv) are kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/.cache/sanity
start=$(date +%s)

# The shellcheck test is the one that needs a program of the system; without it the test is skipped.
if ! command -v shellcheck >/dev/null; then
  mkdir -p .cache
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck; } >.cache/shellcheck-install.log 2>&1; then
    cat .cache/shellcheck-install.log
    exit 1
  fi
fi

# ansible-test's own venv: the ansible-core of requirements.lock (its dependencies pinned there too).
python=${PYTHON:-python3}
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$work/venv
stamp=$venv/.lock-sha
want=$( (sha256sum requirements.lock && "$python" -VV) | sha256sum | cut -c1-16)
if [ ! -x "$venv/bin/ansible-test" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -c requirements.lock \
    "$(grep -i '^ansible-core==' requirements.lock)" 2> >(grep -v 'is ignored: it is neither' >&2)
  echo "$want" >"$stamp"
fi
core=$("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')

# ansible-test downloads pip's bootstrap script from a host this network cannot reach, unless a copy is
# cached under the name of the pip version it wants: put the stand-in there (see get_pip_standin.py).
pip_version=$("$venv/bin/python" - <<'PY'
import pathlib
import re

import ansible_test

source = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"\bpip='([0-9.]+)'", source.read_text()).group(1))
PY
)
cache=$HOME/.ansible/test/cache
mkdir -p "$cache"
install -m 0644 scripts/get_pip_standin.py "$cache/get_pip_${pip_version//./_}.py"

# The tree as ansible-test sees it (see above). Tests write their results under tests/output/ there.
tree=$work/ansible_collections/rayvllm/fleet
rm -rf "$tree"
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' path; do
    # A tracked file deleted in the work tree is not part of it.
    if [ -e "$path" ] || [ -L "$path" ]; then printf '%s\0' "$path"; fi
  done |
  tar --create --no-recursion --null --files-from=- | tar --extract --directory "$tree"
git -C "$tree" init --quiet

echo "== ansible-test sanity (ansible-core $core, python $pyver, pip $pip_version in its venvs, $(shellcheck --version | sed -n 's/^version: /shellcheck /p'))"
cd "$tree"
status=0
"$venv/bin/ansible-test" sanity --local --python "$pyver" --requirements --color no "$@" || status=$?
echo "== ansible-test sanity: $([ "$status" = 0 ] && echo passed || echo "FAILED (exit $status)") in $(($(date +%s) - start)) s"
exit "$status"
