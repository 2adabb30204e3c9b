"""playbooks/remove_node.yml refuses, before anything changes and naming the host, a removal it cannot do."""

from conftest import local_hosts

PLAYBOOK = "playbooks/remove_node.yml"
# Tensor parallel 4 over the head's and the worker's 2 GPUs each.
TP4 = {"ray_num_gpus": 2, "vllm_tensor_parallel_size": 4, "vllm_allow_cross_node_tp": True}


def remove(run_preflight, *names, group_vars=None, workers=("node-b",)):
    args = ["-e", "remove_nodes=%s" % ",".join(names)] if names else []
    rc, out = run_preflight(local_hosts(workers=workers), group_vars, playbook=PLAYBOOK, extra_args=args)
    assert rc != 0, out
    # Refused in the first plays: nothing of the serving side or the nodes ran.
    assert "Upgrade | what Ray runs on" not in out
    assert "Reset | stop and disable" not in out
    return out


def test_without_remove_nodes_nothing_changes(run_preflight):
    out = remove(run_preflight)
    assert "Nothing was changed: set remove_nodes to the inventory names of the Ray nodes to remove" in out


def test_a_head_is_refused_naming_its_cluster(run_preflight):
    out = remove(run_preflight, "node-a")
    assert "remove_nodes names node-a, the head of cluster default: a head cannot leave its cluster" in out


def test_a_name_outside_the_inventory_is_refused_listing_the_workers(run_preflight):
    out = remove(run_preflight, "node-z")
    assert "remove_nodes names node-z, which is no host of the inventory's ray_head or ray_workers groups" in out
    assert "(its Ray workers: node-b)" in out


def test_a_plan_the_remaining_gpus_cannot_hold_is_refused(run_preflight):
    out = remove(run_preflight, "node-b", group_vars=TP4)
    assert (
        "Removing node-b leaves cluster default 2 GPUs (node-a 2), but its vLLM needs 4 (vllm_tensor_parallel_size 4 x "
        "vllm_pipeline_parallel_size 1): nothing was changed." in out
    )
