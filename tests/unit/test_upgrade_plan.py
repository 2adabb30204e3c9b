from ansible_collections.rayvllm.fleet.plugins.module_utils.upgrade_plan import cluster_plan

OLD = {"ray_current": "/opt/ray/2.59.0", "vllm_current": "/opt/vllm/0.31.0-ray2.59.0"}
NEW = {"ray_target": "/opt/ray/2.60.0", "vllm_target": "/opt/vllm/0.32.0-ray2.60.0"}
HOSTS = ("head", "w1", "w2")


def nodes(**override):
    return [dict(dict(OLD, **NEW, host=h, python="3.11.2"), **override.get(h, {})) for h in HOSTS]


def test_a_ray_upgrade_switches_both_links_on_every_node_and_keeps_the_way_back():
    plan = cluster_plan("gpu-a", nodes())
    assert plan["action"] == "ray" and plan["problems"] == []
    assert plan["ray_switch"] == plan["vllm_switch"] == list(HOSTS)
    assert plan["rollback"]["w1"] == {"ray": "/opt/ray/2.59.0", "vllm": "/opt/vllm/0.31.0-ray2.59.0"}
    assert plan["switch_to"]["w1"] == {"ray": "/opt/ray/2.60.0", "vllm": "/opt/vllm/0.32.0-ray2.60.0"}
    text = "\n".join(plan["lines"])
    assert "Ray 2.59.0 -> 2.60.0 on head, w1, w2; restart the head, then every worker" in text
    assert "vLLM 0.31.0-ray2.59.0 -> 0.32.0-ray2.60.0" in text
    assert "back to Ray 2.59.0 and vLLM 0.31.0-ray2.59.0" in text


def test_a_vllm_only_change_does_not_touch_ray():
    same_ray = {h: {"ray_target": "/opt/ray/2.59.0", "vllm_target": "/opt/vllm/0.32.0-ray2.59.0"} for h in HOSTS}
    plan = cluster_plan("gpu-a", [dict(n, **same_ray[n["host"]]) for n in nodes()])
    assert plan["action"] == "vllm" and plan["ray_switch"] == [] and plan["vllm_switch"] == list(HOSTS)
    assert not any("restart the head" in line for line in plan["lines"])


def test_nothing_to_switch_when_every_node_runs_what_was_staged():
    done = {"ray_current": NEW["ray_target"], "vllm_current": NEW["vllm_target"]}
    plan = cluster_plan("gpu-a", [dict(n, **done) for n in nodes()])
    assert plan["action"] == "none" and plan["ray_switch"] == plan["vllm_switch"] == []


def test_a_first_installation_is_left_to_the_phases():
    fresh = {"ray_current": None, "vllm_current": None}
    plan = cluster_plan("gpu-a", [dict(n, **fresh) for n in nodes()])
    assert plan["action"] == "install" and plan["problems"] == [] and plan["rollback"] == {}


def test_new_nodes_during_a_version_change_are_refused_with_the_fix():
    plan = cluster_plan("gpu-a", nodes(w2={"ray_current": None, "vllm_current": None}))
    assert plan["action"] == "install"
    [problem] = plan["problems"]
    assert "w2 have no Ray or vLLM installed yet while head, w1 change versions" in problem
    assert "Add the new nodes in a run without a version change" in problem


def test_new_nodes_without_a_version_change_are_installed_by_the_phases():
    done = {"ray_current": NEW["ray_target"], "vllm_current": NEW["vllm_target"]}
    fleet = [dict(n, **done) for n in nodes()]
    fleet[2].update(ray_current=None, vllm_current=None)
    plan = cluster_plan("gpu-a", fleet)
    assert plan["action"] == "install" and plan["problems"] == []


def test_mixed_python_or_targets_within_a_cluster_are_problems():
    plan = cluster_plan("gpu-a", nodes(w1={"python": "3.11.4"}))
    assert "3.11.2 on head, w2; 3.11.4 on w1" in plan["problems"][0]
    plan = cluster_plan("gpu-a", nodes(w1={"ray_target": "/opt/ray/2.61.0"}))
    assert "staged different Ray venvs (/opt/ray/2.60.0, /opt/ray/2.61.0)" in plan["problems"][0]
