# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The grafana role's input checks (roles/grafana/tasks/validate.yml)."""

import os

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.grafana_dashboard import dashboard_problems
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.inputs.common import is_sequence, not_absolute, text


def problems(values, host, model, context):
    """context: ``dashboard_files`` (the project's dashboards and grafana_extra_dashboards, on the controller) and
    ``datasource_uid`` (the provisioned datasource's fixed uid)."""
    v, found = values, []
    found.extend(not_absolute(v, ("grafana_config_dir", "grafana_dashboards_dir"), host))
    password = v.get("grafana_admin_password")
    if not isinstance(password, str) or password.strip().lower() in ("", "admin"):
        found.append(
            "grafana_admin_password on %s is empty or the default 'admin' (spaces and case aside): set it from a "
            "vault, e.g. `ansible-vault encrypt_string --name grafana_admin_password` into group_vars." % host
        )

    source, package, version = (
        v.get("grafana_install_source"), text(v.get("grafana_package_file") or ""), text(v.get("grafana_version") or "")
    )  # fmt: skip
    if (source == "file" and not (package and os.path.isfile(package))) or (version and source != "apt"):
        found.append(
            "On %s: grafana_install_source=file needs grafana_package_file, a Grafana .deb on the controller (got "
            "'%s'); grafana_version pins the APT install only (got '%s' with grafana_install_source=%s)."
            % (host, package, version, text(source))
        )

    # Every cluster's head runs with its own RAY_PROMETHEUS_NAME; Grafana has one datasource name.
    nodes, clusters = model.get("nodes") or {}, model.get("clusters") or {}
    ray_names = list(dict.fromkeys(
        (nodes.get(c.get("head")) or {}).get("settings", {}).get("ray_prometheus_name") for c in clusters.values()
    ))  # fmt: skip
    name = v.get("grafana_prometheus_datasource_name")
    if ray_names != [name]:
        found.append(
            "grafana_prometheus_datasource_name is '%s' but the Ray heads run with RAY_PROMETHEUS_NAME '%s' "
            "(ray_prometheus_name): the Ray dashboard's Metrics tab would ask Grafana for a datasource that does not "
            "exist. Set ray_prometheus_name only, the same for every cluster; the datasource follows it."
            % (text(name), ", ".join(text(n) for n in ray_names))
        )

    files = [str(f) for f in context.get("dashboard_files") or []]
    ray_dashboards = v.get("grafana_ray_dashboards") if is_sequence(v.get("grafana_ray_dashboards")) else []
    names = [os.path.basename(f) for f in files] + ["ray-%s.json" % d for d in ray_dashboards]
    if len(set(names)) != len(names):
        found.append(
            "grafana_extra_dashboards must not share a file name with each other, the project's dashboards or Ray's "
            "(%s): rename the file." % ", ".join(names)
        )
    uid = context.get("datasource_uid")
    for path in files:
        if not os.path.isfile(path):
            found.append("%s: the file does not exist on the controller" % path)
            continue
        try:
            with open(path) as handle:
                text_ = handle.read()
        except OSError as exc:
            found.append("%s: %s" % (path, exc))
            continue
        bad = dashboard_problems(text_, str(uid), name)
        if bad:
            found.append("%s: %s" % (path, "; ".join(bad)))
    return found
