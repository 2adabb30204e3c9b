#!/usr/bin/env bash
# The fast static checks of CI's first phase (scripts/test.sh runs this beside ansible-lint): run it before a
# commit. Needs the controller venv (scripts/controller-venv.sh) on PATH or at .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/ansible ] && export PATH="$PWD/.venv/bin:$PATH"
mkdir -p .cache
yamllint -s .
ruff check .
ruff format --check .
# docs/variables.md is generated from the roles' argument specs; the changelog is antsibull-changelog's.
python3 scripts/docs-variables.py --check
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
# Every module, filter and lookup has documentation ansible-doc can render (the lists are the plugin directories):
# one ansible-doc per plugin type (one per plugin took ~38 s), which exits 0 on a plugin it cannot find or render
# but warns on stderr, so any stderr output fails.
plugin_docs() {
  local type=$1 ext=$2 path names=() errors
  for path in "plugins/$3"/*."$ext"; do names+=("rayvllm.fleet.$(basename "$path" ".$ext")"); done
  errors=$(ansible-doc -t "$type" "${names[@]}" 2>&1 >/dev/null) || true
  if [ -n "$errors" ]; then
    echo "ansible-doc -t $type: $errors" >&2
    return 1
  fi
}
plugin_docs module py modules
plugin_docs filter yml filter
plugin_docs lookup py lookup
ansible-galaxy collection build --force --output-path .cache/dist >/dev/null
echo "collection artifact: $(ls .cache/dist/*.tar.gz)"

# Alert rules and dashboard queries: promtool from Debian's prometheus package, not installed.
bash scripts/promtool.sh check rules roles/prometheus/files/rules/*.yml
bash scripts/promtool.sh test rules tests/promtool/*.yml
# Every PromQL of the project's dashboards, as recording rules: promtool parses them offline.
python3 scripts/dashboard-rules.py roles/grafana/files/dashboards/*.json >.cache/dashboard-rules.yml
bash scripts/promtool.sh check rules .cache/dashboard-rules.yml
echo "lint: passed"
