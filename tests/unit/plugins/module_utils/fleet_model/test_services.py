"""The table of services and ports: every host's ports, the ones the firewall opens, the routers' collisions."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.services import SERVICES

from .inventory import build, host

RAY_NODE = {
    "node_exporter": [9100],
    "ray_metrics": [8080],
    "dcgm_exporter": [9400],
    "ray_node_manager": [6800],
    "ray_object_manager": [6801],
    "ray_dashboard_agent": [52365],
    "ray_dashboard_agent_grpc": [52366],
    "ray_runtime_env_agent": [52367],
    "ray_workers": [10002, 10999],
    "model_share": [29870],
}


def fleet():
    hosts = {
        "h": host("10.0.0.1", vllm_served_model_name="llama"),
        "w": host("10.0.0.2", preflight_gpu_check=False),
        "mon": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.9"},
        "r": {"vars": {"node_exporter_port": 9101}, "facts": {}, "ansible_host": "10.0.9.8"},
    }
    return build(["h"], ["w"], hosts, monitoring=["mon"], routers=["r"])


def test_every_host_has_the_ports_of_the_services_it_runs_in_the_tables_order():
    model, problems = fleet()
    assert problems == []
    ports = model["ports"]
    assert ports["w"] == {k: v for k, v in RAY_NODE.items() if k != "dcgm_exporter"}
    head = {**RAY_NODE, "vllm": [8000], "ray_dashboard": [8265], "ray_head_metrics": [44217, 44227],
            "ray_gcs": [6379], "ray_client_server": [10001]}  # fmt: skip
    assert ports["h"] == head
    assert list(ports["h"]) == [s.key for s in SERVICES if s.key in head]
    assert ports["mon"] == {"node_exporter": [9100], "prometheus": [9090], "grafana": [3000], "alertmanager": [9093]}
    assert ports["r"] == {
        "node_exporter": [9101],
        "front_door": [30000],
        "door_metrics": [29999],
        "router": [30001],
        "router_metrics": [29000],
    }
    assert model["addresses"] == {"h": "10.0.0.1", "w": "10.0.0.2", "mon": "10.0.9.9", "r": "10.0.9.8"}


def test_the_firewall_opens_only_ports_of_the_table():
    model, _problems = fleet()
    names = {s.name: s.key for s in SERVICES}
    for name, exposure in model["firewall"].items():
        for service in exposure["services"]:
            assert service["ports"] == model["ports"][name][names[service["name"]]], (name, service)


def test_a_router_port_taken_by_another_service_names_both():
    hosts = {"h": host("10.0.0.1", vllm_served_model_name="llama", router_port=9100, router_metrics_port=8265)}
    _model, problems = build(["h"], [], hosts, routers=["h"])
    assert problems == [
        "port 8265 on router host h is wanted by llama's metrics port, Ray dashboard (ray_dashboard_port): give "
        "each its own port (router_port, router_metrics_port, router_model_ports, router_door_metrics_port).",
        "port 9100 on router host h is wanted by front door (router_port), node exporter (node_exporter_port): give "
        "each its own port (router_port, router_metrics_port, router_model_ports, router_door_metrics_port).",
    ]


def test_an_unusable_port_of_any_service_is_refused_once_naming_the_variable_and_every_host():
    """A port out of range or not a number, of any service in the table, is a problem of the model (it was
    computed and dropped: ray_dashboard_port 70000 passed preflight)."""
    hosts = {
        "h": host("10.0.0.1", vllm_served_model_name="llama", ray_dashboard_port=70000),
        "w": host("10.0.0.2", node_exporter_port="9100/tcp", ray_dashboard_port=70000),
        "w2": host("10.0.0.3", node_exporter_port="9100/tcp", ray_dashboard_port=70000),
    }
    model, problems = build(["h"], ["w", "w2"], hosts)
    assert problems == [
        "ray_dashboard_port on h is 70000: not a port number (a whole number from 1 to 65535). Set it to a free port "
        "from 1 to 65535.",
        "node_exporter_port on w, w2 is '9100/tcp': not a port number (a whole number from 1 to 65535). Set it to a "
        "free port from 1 to 65535.",
    ]
    # The model leaves the unusable ports out: nothing downstream opens or scrapes them.
    assert "ray_dashboard" not in model["ports"]["h"] and "node_exporter" not in model["ports"]["w"]


def test_a_string_where_a_list_of_networks_belongs_is_refused_not_read_letter_by_letter():
    hosts = {
        "h": host("10.0.0.1", vllm_served_model_name="llama", vllm_allowed_cidrs="any"),
        "w": host("10.0.0.2", vllm_allowed_cidrs="any"),
    }
    model, problems = build(["h"], ["w"], hosts)
    assert problems == [
        "vllm_allowed_cidrs on h is 'any': a string, not a list. Write it as a YAML list of strings, e.g. "
        "vllm_allowed_cidrs: [10.0.0.0/8]."
    ]
    assert "a" not in {s for svc in model["firewall"]["h"]["services"] for s in svc["sources"]}
