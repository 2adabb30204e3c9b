"""Nodes leaving the fleet (playbooks/remove_node.yml): the model without them, what they were, and the removals
refused before anything changes."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm
from ansible_collections.rayvllm.fleet.plugins.module_utils.fleet_model.removal import leaving_names

from .inventory import DEFAULTS, host

TP4 = {"ray_num_gpus": 2, "vllm_tensor_parallel_size": 4, "vllm_allow_cross_node_tp": True}


def fleet(leaving, head=None, worker=None, **routed):
    """Cluster default: h (head), w1, w2 with 2 GPUs each serving tensor parallel 4; cluster b: b1; mon on m."""
    hosts = {
        "h": host("10.0.0.1", **{**TP4, **(head or {})}),
        "w1": host("10.0.0.2", **{**TP4, **(worker or {})}),
        "w2": host("10.0.0.3", **{**TP4, **(worker or {})}),
        "b1": host("10.0.1.1", "b", ray_num_gpus=2, vllm_tensor_parallel_size=2),
        "m": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    return fm.build(["h", "b1"], ["w1", "w2"], hosts, DEFAULTS, ["m"], routed.get("routers", []), leaving)


def test_the_model_without_a_leaving_worker_keeps_what_it_was_for_its_own_cleanup():
    model, problems = fleet("w2")
    assert problems == []
    assert model["clusters"]["default"]["hosts"] == ["h", "w1"]
    assert "w2" not in model["nodes"] and "w2" not in model["firewall"] and "w2" not in model["addresses"]
    # Its peers no longer open Ray's ports to it, and Prometheus no longer scrapes it.
    assert model["firewall"]["h"]["members"] == ["10.0.0.2"]  # its peers: w1 still, w2 no more
    assert "10.0.0.3" not in str(model["monitoring"])
    assert model["leaving"]["w2"]["cluster"] == "default" and model["leaving"]["w2"]["address"] == "10.0.0.3"
    assert model["leaving"]["w2"]["settings"]["ray_install_root"] == "/opt/ray"
    assert model["removal"] == {
        "default": {"head": "h", "leaving": ["w2"], "staying": ["h", "w1"], "restarts_for_actors": True}
    }


def test_the_same_model_as_an_inventory_without_the_node():
    model = fleet(["w2"])[0]
    hosts = {
        "h": host("10.0.0.1", **TP4),
        "w1": host("10.0.0.2", **TP4),
        "b1": host("10.0.1.1", "b", ray_num_gpus=2, vllm_tensor_parallel_size=2),
        "m": {"vars": {}, "facts": {}, "ansible_host": "10.0.9.1"},
    }
    without, problems = fm.build(["h", "b1"], ["w1"], hosts, DEFAULTS, ["m"], [])
    assert problems == []
    for key in ("clusters", "nodes", "firewall", "monitoring", "addresses", "ports", "routers"):
        assert model[key] == without[key], key


@pytest.mark.parametrize(
    "value, names",
    [("w1", ["w1"]), ("w1, w2", ["w1", "w2"]), (["w2", "w1", "w2"], ["w2", "w1"])],
)
def test_remove_nodes_is_a_list_or_names_separated_by_commas(value, names):
    assert leaving_names(value) == (names, [])


@pytest.mark.parametrize("value", ["w1,,w2", " ", ["w1", 3], {"w1": 1}, 7])
def test_an_unusable_remove_nodes_is_refused_naming_it(value):
    model, problems = fleet(value)
    assert problems and problems[0].startswith("remove_nodes is %r" % (value,))
    assert "-e remove_nodes=<host>[,<host>...]" in problems[0]
    assert model["clusters"]["default"]["hosts"] == ["h", "w1", "w2"] or isinstance(value, list)


def test_an_unknown_host_is_refused_listing_the_workers():
    _model, problems = fleet("w9")
    assert problems == [
        "remove_nodes names w9, which is no host of the inventory's ray_head or ray_workers groups (its Ray workers: "
        "w1, w2). Use the inventory names of the hosts to remove, and keep them in the inventory until "
        "playbooks/remove_node.yml has removed them."
    ]


def test_a_head_is_refused_with_the_way_to_retire_its_cluster():
    model, problems = fleet("b1")
    (problem,) = problems  # only that: not also what the fleet would look like without it
    assert problem.startswith("remove_nodes names b1, the head of cluster b: a head cannot leave its cluster")
    assert "playbooks/reset.yml --limit on its hosts (b1)" in problem
    assert model["leaving"] == {} and model["removal"] == {} and "b" in model["clusters"]


def test_a_node_that_also_runs_a_router_is_refused():
    _model, problems = fleet("w2", routers=["w2"])
    assert any("remove_nodes names w2, which is also in the inventory's router group" in p for p in problems)


def test_a_plan_that_the_remaining_gpus_cannot_hold_is_refused_with_the_arithmetic():
    _model, problems = fleet("w1,w2")
    assert problems[0] == (
        "Removing w1, w2 leaves cluster default 2 GPUs (h 2), but its vLLM needs 4 (vllm_tensor_parallel_size 4 x "
        "vllm_pipeline_parallel_size 1): nothing was changed. Give the cluster a plan that fits the GPUs it keeps "
        "first (playbooks/upgrade.yml rolls it through the router's rotation and the gate), or add a node in its place."
    )


def test_tensor_parallel_inside_one_node_needs_a_node_that_holds_it():
    _model, problems = fleet(
        "w2",
        head={"ray_num_gpus": 2, "vllm_tensor_parallel_size": 4, "vllm_allow_cross_node_tp": False},
        worker={"ray_num_gpus": 4, "vllm_tensor_parallel_size": 4, "vllm_allow_cross_node_tp": False},
    )
    assert problems == []  # w1 still holds 4
    _model, problems = fleet(
        "w1,w2",
        head={"ray_num_gpus": 8, "vllm_tensor_parallel_size": 8, "vllm_allow_cross_node_tp": False},
        worker={"ray_num_gpus": 8, "vllm_tensor_parallel_size": 8, "vllm_allow_cross_node_tp": False},
    )
    assert problems == []


def test_a_ray_serve_cluster_keeps_the_gpus_its_models_need_at_max_replicas():
    serve = {"vllm_serving_mode": "ray_serve", "ray_num_gpus": 2, "vllm_tensor_parallel_size": 1}
    models = [
        {"name": "a", "max_replicas": 2, "tensor_parallel_size": 1, "pipeline_parallel_size": 1},
        {"name": "b", "max_replicas": 1, "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    ]
    model, problems = fleet("w2", head={**serve, "ray_serve_models": models}, worker=serve)
    assert problems == []  # 4 GPUs left (h 2, w1 2), 4 needed
    # Serve moves the leaving node's replicas itself: the cluster's serving does not restart for them.
    assert model["removal"]["default"]["restarts_for_actors"] is False
    _model, problems = fleet("w1,w2", head={**serve, "ray_serve_models": models}, worker=serve)
    assert problems[0] == (
        "Removing w1, w2 leaves cluster default 2 GPUs (h 2), but its Ray Serve models need 4 at max_replicas "
        "(max_replicas x tensor_parallel_size x pipeline_parallel_size: a 2 x 1 x 1, b 1 x 2 x 1): nothing was "
        "changed. Lower max_replicas in ray_serve_models first (site.yml applies it in place), or add a node in its "
        "place."
    )


def test_gpus_ray_detects_are_not_counted_against():
    _model, problems = fleet("w1,w2", head={"ray_num_gpus": None}, worker={"ray_num_gpus": None})
    assert not any(p.startswith("Removing") for p in problems)
