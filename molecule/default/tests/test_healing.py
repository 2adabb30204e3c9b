"""Self-healing on the sandbox, read-only (issue 14): vllm-watchdog runs on the head and probes with real
completions, Alertmanager runs and Prometheus sends to it. The faults themselves, which change the fleet,
run in molecule/default/stages/test_2_faults.py."""

import json

from sandbox import HEAD_IP, api, head, vllm_api_key, wait_for

AM_URL = f"http://{HEAD_IP}:9093"


def test_the_watchdog_timer_runs_and_its_probes_complete():
    host = head()
    timer = host.service("vllm-watchdog.timer")
    assert timer.is_enabled and timer.is_running
    # Every playbook that held the watchdog off released it when it ended (a hold left over would keep it off
    # for vllm_watchdog_hold_timeout after a first deployment).
    hold = host.file("/run/vllm-watchdog/hold")
    assert not hold.exists, f"the converge left a hold in place: {hold.content_string}"

    def probed_ok():
        # No state file yet: the watchdog has not run since its timer started (its first run: 10 s after).
        state_file = host.file("/var/lib/vllm-watchdog/state.json")
        if not state_file.exists:
            return None
        state = json.loads(state_file.content_string)
        return state if state.get("last_ok") and state["failures"] == 0 else None

    state = wait_for(probed_ok, timeout=120, interval=5)
    assert state["restarts"] == 0, state
    # The probe's figures reach Prometheus through the node exporter's textfile collector.
    wait_for(lambda: api("query", query='vllm_watchdog_probe_success{host="ray-head"} == 1')["result"], timeout=120)


def test_the_watchdog_never_holds_the_key_in_its_unit_or_journal():
    host = head()
    unit = host.file("/etc/systemd/system/vllm-watchdog.service").content_string
    journal = host.check_output("journalctl -u vllm-watchdog --no-pager -o cat")
    assert vllm_api_key() not in unit and vllm_api_key() not in journal
    assert "EnvironmentFile=/etc/vllm/vllm.env" in unit


def test_alertmanager_runs_with_a_checked_configuration_and_prometheus_sends_to_it():
    host = head()
    assert host.service("prometheus-alertmanager").is_running
    config = host.file("/etc/prometheus/alertmanager.yml")
    assert config.mode == 0o640 and config.user == "root" and config.group == "prometheus"
    assert host.run("amtool check-config /etc/prometheus/alertmanager.yml").rc == 0
    assert "10.77.0.1:9199" in config.content_string

    def active():
        return [am["url"] for am in api("alertmanagers")["activeAlertmanagers"]]

    assert wait_for(active, timeout=120) == [f"http://{HEAD_IP}:9093/api/v2/alerts"]


def test_the_rules_for_a_hung_engine_and_the_watchdog_are_loaded():
    rules = {r["name"] for g in api("rules")["groups"] for r in g["rules"]}
    assert {"VllmEngineHung", "VllmWatchdogRestarting", "VllmWatchdogNotRunning"} <= rules
