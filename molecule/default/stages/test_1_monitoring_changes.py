"""Changes to monitoring on the converged sandbox: a rule file that does not parse, the release-archive
install and its switch back, Ray's service-discovery file. Each restores the deployed configuration."""

import functools
import hashlib
import http.server
import json
import re
import tarfile
import threading


from sandbox import (
    ROOT,
    all_up,
    api,
    head,
    one_cluster_inventory,
    playbook,
    prometheus_binary,
    prometheus_pid,
    wait_for,
)


def test_a_rule_file_that_does_not_parse_fails_before_prometheus_restarts(tmp_path):
    broken = tmp_path / "team-alerts.yml"
    broken.write_text("groups:\n  - name: team\n    rules:\n      - alert: Broken\n        expr: sum(rate(up[5m])\n")
    groups_before = sorted(g["name"] for g in api("rules")["groups"])
    pid = prometheus_pid()
    rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e",
                       json.dumps({"prometheus_extra_rule_files": [str(broken)]}))  # fmt: skip
    assert rc != 0
    # host_files checks each new file with its validate command before renaming it: the message names the file,
    # the checker and says the old file stays.
    assert "promtool refused the new /etc/prometheus/rules/team-alerts.yml" in out, out[-3000:]
    assert "the old file is unchanged" in out, out[-3000:]
    assert "parse error" in out or "could not parse" in out, out[-3000:]
    assert prometheus_pid() == pid
    assert not head().file("/etc/prometheus/rules/team-alerts.yml").exists
    assert sorted(g["name"] for g in api("rules")["groups"]) == groups_before


def test_a_valid_rule_file_is_loaded_by_a_reload_not_a_restart_and_removed_again(tmp_path):
    """Prometheus runs without its lifecycle API: a change that passes promtool reaches it by SIGHUP (systemctl
    reload), so its process, and the data in memory, stay."""
    rules = tmp_path / "team-alerts.yml"
    rules.write_text("groups:\n  - name: team\n    rules:\n      - record: team:always:one\n        expr: vector(1)\n")
    pid = prometheus_pid()
    rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e",
                       json.dumps({"prometheus_extra_rule_files": [str(rules)]}))  # fmt: skip
    try:
        assert rc == 0, out[-3000:]
        assert wait_for(lambda: "team" in [g["name"] for g in api("rules")["groups"]], timeout=60)
        assert prometheus_pid() == pid, "Prometheus was restarted, not reloaded"
    finally:
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus")
    assert rc == 0, out[-3000:]
    assert not head().file("/etc/prometheus/rules/team-alerts.yml").exists
    assert wait_for(lambda: "team" not in [g["name"] for g in api("rules")["groups"]], timeout=60)
    assert prometheus_pid() == pid, "Prometheus was restarted, not reloaded"


def serve(directory):
    """Serve a directory on the sandbox network's gateway address, as a mirror would."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("10.77.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def release_archive(tmp_path):
    """A release-shaped archive holding Debian's prometheus 2.42.0 binaries (no upstream download reachable)."""
    binaries = ROOT / ".cache/promtool/x/usr/bin"
    name = "prometheus-2.42.0.linux-amd64"
    archive = tmp_path / f"{name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for binary in ("prometheus", "promtool"):
            tar.add(binaries / binary, f"{name}/{binary}")
        for empty in ("consoles", "console_libraries"):
            (tmp_path / empty).mkdir()
            tar.add(tmp_path / empty, f"{name}/{empty}")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_release_archive_install_checks_the_checksum_and_switches_back(tmp_path):
    archive, sha256 = release_archive(tmp_path)
    server = serve(tmp_path)
    archive_vars = {
        "prometheus_install_source": "archive",
        "prometheus_version": "2.42.0",
        "prometheus_archive_url": f"http://10.77.0.1:{server.server_address[1]}/{archive.name}",
        "prometheus_archive_checksum": "sha256:" + "0" * 64,
    }
    try:
        pid = prometheus_pid()
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc != 0 and "checksum" in out.lower(), out[-3000:]
        assert prometheus_pid() == pid

        archive_vars["prometheus_archive_checksum"] = "sha256:" + sha256
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc == 0, out[-3000:]
        assert prometheus_binary() == "/opt/prometheus/current/prometheus"
        assert head().file("/opt/prometheus/current").linked_to == "/opt/prometheus/2.42.0"
        assert "2.42.0" in head().check_output("/opt/prometheus/current/prometheus --version 2>&1")
        wait_for(all_up, timeout=120, interval=5)
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", json.dumps(archive_vars))
        assert rc == 0 and re.search(r"ray-head\s+: ok=\d+\s+changed=0", out), out[-2000:]
    finally:
        server.shutdown()
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus")
    assert rc == 0, out[-3000:]
    assert prometheus_binary() == "/usr/bin/prometheus"
    assert not head().file("/etc/systemd/system/prometheus.service").exists
    wait_for(all_up, timeout=120, interval=5)


def test_ray_service_discovery_file_lists_the_same_targets():
    """Ray writes its service-discovery file for its own cluster only: refused on the two-cluster sandbox, used
    with an inventory of cluster default alone."""
    sd = "prometheus_ray_service_discovery=true"
    rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", sd)
    refusal = "which is not the Ray head of the fleet's only cluster (clusters: b, default)"
    assert rc != 0 and refusal in out, out[-3000:]
    try:
        one = one_cluster_inventory()
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus", "-e", sd, inventory=one)
        assert rc == 0, out[-3000:]

        def discovered():
            by_job = all_up()
            ray = (by_job or {}).get("ray", [])
            from_file = [t for t in ray if "__meta_filepath" in t["discoveredLabels"]]
            return ray if len(from_file) == len(ray) == 5 else None

        ray = wait_for(discovered, timeout=120, interval=5)
        assert sorted(t["labels"]["ray_target"] for t in ray) == ["head", "head", "node", "node", "node"]
        assert {t["labels"]["ray_cluster"] for t in ray} == {"default"}  # the head's cluster, from the fleet model
        # The same host labels as the static targets: the series continue instead of doubling.
        assert sorted(t["labels"]["host"] for t in ray) == ["ray-head"] * 3 + ["ray-worker-1", "ray-worker-2"]
        count = 'count(ray_node_cpu_count{ray_cluster="default"})'  # (cluster b's series are not from the file)
        assert wait_for(lambda: api("query", query=count)["result"])[0]["value"][1] == "3"
    finally:
        rc, out = playbook("playbooks/monitoring.yml", "--tags", "prometheus")
    assert rc == 0, out[-3000:]
    wait_for(lambda: all_up() and all("__meta_filepath" not in t["discoveredLabels"] for t in all_up()["ray"]))
