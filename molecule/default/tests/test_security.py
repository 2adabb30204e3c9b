"""Secure by default, on the sandbox fleet: Ray token auth, the vLLM API key, the host firewall, hardened
units and no secret in any output. Each check can fail; nothing here changes the fleet."""

import json
import os
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import testinfra
from sandbox import (
    ALL_NODE_IPS,
    HEAD_IP,
    NODE_IPS,
    PROMETHEUS,
    RAY_TOKEN_FILE,
    SETTINGS,
    VLLM_URL,
    ray_api,
    ray_client,
    ray_token,
    vllm_api_key,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[3]
HOSTS = list(NODE_IPS)
# The "ShadowRay" request: an unauthenticated job submission that runs a shell command on the cluster.
ATTACK = {"entrypoint": "id; hostname"}
# A container on the sandbox network that is not a cluster member (not in firewall_admin_cidrs either), but
# in vllm_allowed_cidrs and router_allowed_cidrs (10.77.0.0/26); the stranger is in neither.
OUTSIDER_IP = "10.77.0.50"
STRANGER_IP = "10.77.0.200"
# The converge of scripts/test.sh runs at -vvv into this log.
CONVERGE_LOG = ROOT / ".cache/converge-vvv.log"


def node(name):
    return testinfra.get_host("docker://" + name)


def http_status(url, data=None, headers=None, timeout=10):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_unauthenticated_job_submission_is_refused():
    """The ShadowRay request, exactly, without the token."""
    body = json.dumps(ATTACK).encode()
    status = http_status(
        f"http://{HEAD_IP}:{SETTINGS['ray_dashboard_port']}/api/jobs/", body, {"Content-Type": "application/json"}
    )
    assert status in (401, 403), status
    assert http_status(f"http://{HEAD_IP}:{SETTINGS['ray_dashboard_port']}/api/v0/nodes") in (401, 403)


def test_wrong_token_is_refused():
    with pytest.raises(urllib.error.HTTPError) as err:
        ray_api("/api/v0/nodes", token="x" * 64)
    assert err.value.code in (401, 403)


def test_the_same_submission_with_the_token_runs_as_the_service_account():
    job = ray_api("/api/jobs/", data=ATTACK)
    job_id = job.get("submission_id") or job["job_id"]

    def finished():
        status = ray_api(f"/api/jobs/{job_id}")["status"]
        return status if status in ("SUCCEEDED", "FAILED", "STOPPED") else None

    assert wait_for(finished, timeout=120, interval=2) == "SUCCEEDED"
    logs = ray_api(f"/api/jobs/{job_id}/logs")["logs"]
    assert f"uid={node('ray-head').check_output('id -u ' + SETTINGS['ray_user'])}({SETTINGS['ray_user']})" in logs


@pytest.mark.parametrize(
    ("label", "env", "refusal"),
    [
        # A plain client (no auth settings at all): the cluster refuses the connection.
        ("no token", "HOME=/nonexistent", "Failed to connect to Ray cluster"),
        # A client that offers a token, but not the cluster's: the GCS says so.
        ("wrong token", "RAY_AUTH_MODE=token RAY_AUTH_TOKEN=" + "y" * 64 + " HOME=/nonexistent", "InvalidAuthToken"),
    ],
)
def test_a_ray_client_without_the_token_cannot_connect(label, env, refusal):
    """ray.init() against the head's GCS from a member host (the firewall lets it through): only the token decides."""
    result = ray_client(env)
    assert "CONNECTED" not in result.stdout, f"{label}: connected without the cluster's token"
    assert refusal in result.stderr, result.stderr[-2000:]


def test_the_ray_client_server_needs_the_token_too():
    """ray:// (the Ray Client server, ray_client_server_port) from a member host: without the token the server never
    answers (the client gives up after its tries); with it the same client gets in, so the refusal is the token's."""
    address = f"ray://{HEAD_IP}:{SETTINGS['ray_client_server_port']}"
    refused = ray_client(address=address)
    assert "CONNECTED" not in refused.stdout, "connected to the Ray Client server without the cluster's token"
    assert "ray client connection timeout" in refused.stderr, refused.stderr[-2000:]
    token_env = f"HOME=/nonexistent RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={RAY_TOKEN_FILE}"
    with_token = ray_client(token_env, address=address, refused=False)
    if "Starting Ray client server failed" in with_token.stderr:
        # The token was accepted (the proxier got as far as starting this client's own server), but that server
        # process exited while starting: seen once on the loaded CI machine, not reproduced. Once more, after a pause.
        time.sleep(10)
        with_token = ray_client(token_env, address=address, refused=False)
    assert "CONNECTED" in with_token.stdout, with_token.stderr[-2000:]


def test_token_is_a_group_readable_file_never_an_argument_or_variable():
    token = ray_token()
    assert len(token) >= 32
    for name in HOSTS:
        host = node(name)
        token_file = host.file("/etc/ray/auth_token")
        assert (token_file.user, token_file.group, token_file.mode) == ("root", SETTINGS["ray_group"], 0o640)
        assert token_file.content_string.strip() == token, f"{name} holds another cluster's token"
        service = "ray-head" if name == "ray-head" else "ray-worker"
        shown = host.check_output(f"systemctl show {service}")
        assert token not in shown and token not in host.check_output("ps -eo args")
        assert "RAY_AUTH_MODE" not in shown  # from the environment file, not Environment=
        env = host.file("/etc/ray/ray.env").content_string
        assert 'RAY_AUTH_MODE="token"' in env and 'RAY_AUTH_TOKEN_PATH="/etc/ray/auth_token"' in env
    head = node("ray-head")
    assert token not in head.check_output("systemctl show vllm")


def test_vllm_requires_the_key_on_v1_and_serves_with_it():
    for path in ("/v1/models", "/v1/completions"):
        assert http_status(VLLM_URL + path) == 401, path
    request = urllib.request.Request(VLLM_URL + "/v1/models", headers={"Authorization": "Bearer " + vllm_api_key()})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert SETTINGS["vllm_served_model_name"] in [m["id"] for m in json.load(response)["data"]]


def test_prometheus_has_no_lifecycle_api():
    assert http_status(PROMETHEUS + "/-/quit", data=b"") in (403, 404)
    assert http_status(PROMETHEUS + "/-/reload", data=b"") in (403, 404)
    assert "--web.enable-lifecycle" not in node("ray-head").check_output("ps -eo args")


SANDBOXING = ("NoNewPrivileges", "PrivateTmp", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups",
              "RestrictSUIDSGID", "LockPersonality")  # fmt: skip


def sandboxing(host, service):
    """{property: value} of a unit's sandboxing settings, its user and writable paths, as systemd runs them."""
    shown = node(host).check_output(
        f"systemctl show {service} -p NoNewPrivileges -p ProtectSystem -p ProtectHome -p PrivateTmp "
        "-p ProtectKernelTunables -p ProtectKernelModules -p ProtectControlGroups -p RestrictSUIDSGID "
        "-p LockPersonality -p PrivateDevices -p MemoryDenyWriteExecute -p User -p ReadWritePaths -p ActiveState"
    )
    props = dict(line.split("=", 1) for line in shown.splitlines())
    assert props["ProtectSystem"] == "strict" and props["ProtectHome"] == "yes", (service, props)
    for key in SANDBOXING:
        assert props[key] == "yes", (service, key)
    return props


@pytest.mark.parametrize(
    "service,host", [("ray-head", "ray-head"), ("ray-worker", "ray-worker-1"), ("vllm", "ray-head")]
)
def test_services_are_sandboxed_but_keep_devices(service, host):
    props = sandboxing(host, service)
    assert props["PrivateDevices"] == "no" and props["MemoryDenyWriteExecute"] == "no"
    assert props["User"] == SETTINGS["ray_user"]


@pytest.mark.parametrize(
    "service,user,writable",
    [
        (f"vllm-router@{SETTINGS['vllm_served_model_name']}", "vllm-router", ["/var/lib/vllm-router"]),
        ("vllm-router-health", "", ["/var/lib/vllm-router", "-/var/lib/prometheus/node-exporter"]),
        ("vllm-watchdog", "", ["-/var/lib/prometheus/node-exporter"]),
        ("prometheus", "prometheus", ["/var/lib/prometheus/metrics2"]),
        ("prometheus-alertmanager", "prometheus", ["/var/lib/prometheus/alertmanager"]),
    ],
)
def test_the_other_services_are_sandboxed_without_devices(service, user, writable):
    """The router, its rotation keeper, the watchdog, Prometheus and Alertmanager (each running, or a timer's last
    run fine): the same sandboxing plus PrivateDevices (and MemoryDenyWriteExecute for the Go programs)."""
    props = sandboxing("ray-head", service)
    assert props["PrivateDevices"] == "yes", service
    if service.startswith("prometheus"):
        assert props["MemoryDenyWriteExecute"] == "yes", service
    assert props["User"] == user
    assert props["ReadWritePaths"].split() == writable
    if service in ("vllm-router-health", "vllm-watchdog"):  # timer-driven oneshots: the last run succeeded
        assert node("ray-head").check_output(f"systemctl show {service} -p Result --value") == "success"
    else:
        assert props["ActiveState"] == "active", service


def host_pid(container, pid):
    """The PID on this machine of a container's process (nsenter from here has the rights a container lacks)."""
    for line in subprocess.check_output(["docker", "top", container, "-eo", "pid"], text=True).split()[1:]:
        status = Path(f"/proc/{line}/status").read_text()
        if status.split("NSpid:")[1].split("\n")[0].split()[-1] == pid:
            return line
    raise AssertionError(f"{container}: no process {pid}")


def test_the_engine_sockets_are_visible_to_the_ranks_ray_starts_on_the_head():
    """vLLM's engine (vllm.service) hands the ranks Ray places on the head ZeroMQ ipc sockets; those
    ranks run under ray-head.service, whose /tmp is private: a socket in the engine's /tmp hangs the
    start for good. Whether ranks land on the head is Ray's choice, so check the directory itself."""
    head = node("ray-head")
    engine = host_pid("ray-head", head.check_output("systemctl show vllm -p MainPID --value"))
    raylet = host_pid("ray-head", head.check_output("systemctl show ray-head -p MainPID --value"))
    environ = Path(f"/proc/{engine}/environ").read_bytes().decode().split("\0")
    base = next((e.split("=", 1)[1] for e in environ if e.startswith("VLLM_RPC_BASE_PATH=")), "")
    assert base.startswith("/") and not base.startswith(("/tmp", "/var/tmp")), base
    probe = f"{base}/.rayvllm-probe-{os.getpid()}"
    subprocess.check_call(["nsenter", "-t", engine, "-m", "touch", probe])
    try:
        seen = subprocess.run(["nsenter", "-t", raylet, "-m", "test", "-e", probe], check=False).returncode == 0
        assert seen, f"{probe}, made in vllm.service's mount namespace, is not seen by ray-head.service"
    finally:
        subprocess.run(["nsenter", "-t", engine, "-m", "rm", "-f", probe], check=False)


def test_weights_are_readable_not_writable_by_the_service_account():
    head = node("ray-head")
    model = SETTINGS["model_path"]
    user = SETTINGS["ray_user"]
    read = head.run(f"runuser -u {user} -- cat {model}/config.json")
    assert read.rc == 0 and read.stdout.strip().startswith("{"), read.stderr
    write = head.run(f"runuser -u {user} -- touch {model}/x")
    assert write.rc != 0 and "ermission denied" in write.stderr, write.stderr


def test_every_host_runs_the_firewall_table():
    for name in HOSTS:
        ruleset = node(name).check_output("nft list table inet rayvllm_fleet")
        assert "policy drop" in ruleset, name
        assert node(name).service("rayvllm-firewall").is_enabled


PROBE = textwrap.dedent(
    """
    import json, socket, sys, urllib.error, urllib.request
    from concurrent.futures import ThreadPoolExecutor
    def connect(host, port):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect((host, port))
            return "open"
        except OSError as exc:
            return type(exc).__name__
        finally:
            s.close()
    # All ports at once: a port the firewall drops waits out its 3 s timeout (one after the other: 33 s).
    ports = [tuple(p) for p in json.loads(sys.argv[1])]
    with ThreadPoolExecutor(len(ports)) as pool:
        states = list(pool.map(lambda p: connect(*p), ports))
    result = dict(("%s:%s" % p, state) for p, state in zip(ports, states))
    try:
        urllib.request.urlopen(sys.argv[2], timeout=10)
        result["vllm_models"] = 200
    except urllib.error.HTTPError as err:
        result["vllm_models"] = err.code
    except OSError as exc:
        result["vllm_models"] = type(exc).__name__
    print(json.dumps(result))
    """
)


def probe(ports, docker_args, image=None):
    image = image or os.environ.get("RAYVLLM_HOST_IMAGE", "rayvllm-host:latest")
    proc = subprocess.run(
        ["docker", "run", "--rm", *docker_args, "--entrypoint", "python3", image, "-c", PROBE, json.dumps(ports),
         VLLM_URL + "/v1/models"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_host_outside_the_cluster_reaches_only_the_vllm_port():
    head_ports = [SETTINGS[p] for p in ("ray_gcs_port", "ray_dashboard_port", "ray_client_server_port")]
    # Ray metrics, node exporter, Prometheus, Alertmanager
    head_ports += [SETTINGS["ray_metrics_export_port"], 9100, 9090, 9093]
    head_ports += [29000, 29001]  # the routers' metrics (the door 30000 and routers 30001-2: router_allowed_cidrs)
    worker_ports = [SETTINGS["ray_metrics_export_port"], SETTINGS["ray_node_manager_port"], 9100]
    closed = [(HEAD_IP, p) for p in head_ports] + [(NODE_IPS["ray-worker-1"], p) for p in worker_ports]
    vllm = (HEAD_IP, SETTINGS.get("vllm_port", 8000))
    seen = probe(closed + [vllm], ["--network", "rayvllm-sandbox", "--ip", OUTSIDER_IP])
    assert seen.pop("%s:%s" % vllm) == "open"
    assert seen.pop("vllm_models") == 401  # reachable, but the key guards /v1
    assert {k: v for k, v in seen.items() if v == "open"} == {}, seen


def test_a_host_outside_the_allowed_networks_reaches_neither_vllm_nor_the_router():
    """vLLM's routes besides /v1 (/metrics, /tokenize, ...) need no key: only vllm_allowed_cidrs, the cluster and
    the Prometheus and router hosts reach its port. From the same network, outside those: every port is closed."""
    ports = [(HEAD_IP, SETTINGS.get("vllm_port", 8000)), (ALL_NODE_IPS["ray-b-head"], SETTINGS.get("vllm_port", 8000))]
    ports += [(HEAD_IP, 30000), (HEAD_IP, SETTINGS["ray_dashboard_port"])]  # the router, the dashboard
    seen = probe(ports, ["--network", "rayvllm-sandbox", "--ip", STRANGER_IP])
    assert seen.pop("vllm_models") not in (200, 401), "the stranger reached vLLM's HTTP server"
    assert {k: v for k, v in seen.items() if v == "open"} == {}, seen
    # The control: the outsider, inside vllm_allowed_cidrs and router_allowed_cidrs, reaches both of them.
    allowed = probe(ports[:3], ["--network", "rayvllm-sandbox", "--ip", OUTSIDER_IP])
    assert allowed.pop("vllm_models") == 401
    assert set(allowed.values()) == {"open"}, allowed


def test_cluster_members_reach_each_other():
    """The control for the test above: the same ports answer a member of the cluster."""
    worker = node("ray-worker-2")
    for port in (SETTINGS["ray_gcs_port"], SETTINGS["ray_dashboard_port"], 9100, SETTINGS["ray_metrics_export_port"]):
        result = worker.run(f"python3 -c \"import socket; socket.create_connection(('{HEAD_IP}', {port}), timeout=3)\"")
        assert result.rc == 0, (port, result.stderr)


def test_no_secret_in_the_converge_output_at_vvv():
    if not CONVERGE_LOG.exists():
        pytest.skip(f"{CONVERGE_LOG} absent: scripts/test.sh writes it with `molecule converge -- -vvv`")
    text = CONVERGE_LOG.read_text(errors="replace")
    assert "<ray-head> EXEC" in text, "the log is not a -vvv run"
    secrets = {"Ray token": ray_token(), "vLLM API key": vllm_api_key()}
    if SETTINGS.get("grafana_admin_password"):
        secrets["Grafana password"] = SETTINGS["grafana_admin_password"]
    if SETTINGS.get("model_hf_token"):
        secrets["HF token"] = SETTINGS["model_hf_token"]
    shown = [name for name, value in secrets.items() if value in text]
    assert shown == [], f"shown at -vvv: {shown}"
