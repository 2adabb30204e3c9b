"""Print a Prometheus rule file with one recording rule per dashboard query, variables expanded,
so `promtool check rules` parses every PromQL expression of the dashboards without a server:
    python3 scripts/dashboard-rules.py DASHBOARD.json... > rules.yml
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collections"))
from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.grafana_dashboard import panel_queries  # noqa: E402


def main(paths):
    groups = []
    for path in paths:
        rules = []
        for title, ref, expr in panel_queries(Path(path).read_text()):
            name = re.sub(r"[^a-zA-Z0-9_]+", "_", "%s_%s_%s" % (Path(path).stem, title, ref)).strip("_")
            rules.append({"record": "dashboard:" + name, "expr": expr})
        groups.append({"name": Path(path).name, "rules": rules})
    json.dump({"groups": groups}, sys.stdout, indent=1)  # JSON is YAML
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
