from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.upgrade_plan import cluster_plan

HOSTS = ("head", "w1", "w2")
RAY = {"link": "/opt/ray/current", "current": "/opt/ray/2.59.0", "target": "/opt/ray/2.60.0"}
VLLM = {"link": "/opt/vllm/current", "current": "/opt/vllm/0.31.0-ray2.59.0", "target": "/opt/vllm/0.32.0-ray2.60.0"}
MODEL = {"link": "/srv/m", "current": "/srv/m.revisions/hf-aaa", "target": "/srv/m.revisions/hf-aaa"}


def nodes(**override):
    """Every node on Ray 2.59 / vLLM 0.31 with 2.60 / 0.32 staged, the weights unchanged; override[host][part]."""
    fleet = []
    for host in HOSTS:
        node = {"host": host, "python": "3.11.2", "ray": dict(RAY), "vllm": dict(VLLM), "model": dict(MODEL)}
        for key, value in override.get(host, {}).items():
            node[key] = dict(node[key], **value) if isinstance(value, dict) else value
        fleet.append(node)
    return fleet


def every(**parts):
    return {host: parts for host in HOSTS}


def links(entries, host):
    return {e["link"]: e["target"] for e in entries if e["host"] == host}


def test_a_ray_upgrade_switches_both_venvs_on_every_node_and_keeps_the_way_back():
    plan = cluster_plan("gpu-a", nodes())
    assert plan["action"] == "ray" and plan["problems"] == []
    assert plan["changes"] == {"ray": list(HOSTS), "vllm": list(HOSTS), "model": []}
    assert links(plan["switch"], "w1") == {"/opt/ray/current": "/opt/ray/2.60.0", "/opt/vllm/current": VLLM["target"]}
    assert links(plan["rollback"], "w1") == {
        "/opt/ray/current": "/opt/ray/2.59.0",
        "/opt/vllm/current": VLLM["current"],
    }
    text = "\n".join(plan["lines"])
    assert "Ray 2.59.0 -> 2.60.0 on head, w1, w2; restart the head, then every worker" in text
    assert "vLLM 0.31.0-ray2.59.0 -> 0.32.0-ray2.60.0" in text
    assert "back to Ray 2.59.0, vLLM 0.31.0-ray2.59.0, same order" in text
    assert plan["back"] == "Ray 2.59.0, vLLM 0.31.0-ray2.59.0"


def test_a_vllm_only_change_does_not_touch_ray():
    same_ray = every(ray={"target": RAY["current"]}, vllm={"target": "/opt/vllm/0.32.0-ray2.59.0"})
    plan = cluster_plan("gpu-a", nodes(**same_ray))
    assert plan["action"] == "vllm" and plan["changes"]["ray"] == [] and plan["changes"]["vllm"] == list(HOSTS)
    assert not any("restart the head" in line for line in plan["lines"])
    assert all(e["link"] == "/opt/vllm/current" for e in plan["switch"])


def test_new_weights_alone_restart_only_vllm_and_switch_by_link():
    done = every(
        ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]}, model={"target": "/srv/m.revisions/hf-bbb"}
    )
    plan = cluster_plan("gpu-a", nodes(**done))
    assert plan["action"] == "vllm" and plan["changes"]["model"] == list(HOSTS)
    assert links(plan["switch"], "head") == {"/srv/m": "/srv/m.revisions/hf-bbb"}
    assert links(plan["rollback"], "head") == {"/srv/m": "/srv/m.revisions/hf-aaa"}
    assert "weights hf-aaa -> hf-bbb on head, w1, w2" in "\n".join(plan["lines"])


def test_nothing_to_switch_when_every_node_runs_what_was_staged():
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]})
    plan = cluster_plan("gpu-a", nodes(**done))
    assert plan["action"] == "none" and plan["switch"] == [] and plan["rollback"] == []


def test_weights_used_in_place_are_not_part_of_the_switch():
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]}, model={"link": ""})
    assert cluster_plan("gpu-a", nodes(**done))["action"] == "none"


def test_a_first_installation_is_left_to_the_phases():
    fresh = every(ray={"current": None}, vllm={"current": None}, model={"current": None})
    plan = cluster_plan("gpu-a", nodes(**fresh))
    assert plan["action"] == "install" and plan["problems"] == [] and plan["switch"] == []


def test_new_nodes_during_a_version_change_are_refused_with_the_fix():
    plan = cluster_plan("gpu-a", nodes(w2={"ray": {"current": None}, "vllm": {"current": None}}))
    assert plan["action"] == "install"
    [problem] = plan["problems"]
    assert "w2 have no Ray or vLLM installed yet while head, w1 change versions or weights" in problem
    assert "Add the new nodes in a run without a version change" in problem


def test_new_nodes_without_a_version_change_are_installed_by_the_phases():
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]})
    done["w2"] = {"ray": {"current": None}, "vllm": {"current": None}, "model": {"current": None}}
    plan = cluster_plan("gpu-a", nodes(**done))
    assert plan["action"] == "install" and plan["problems"] == []


def test_mixed_python_or_targets_within_a_cluster_are_problems():
    plan = cluster_plan("gpu-a", nodes(w1={"python": "3.11.4"}))
    assert "3.11.2 on head, w2; 3.11.4 on w1" in plan["problems"][0]
    plan = cluster_plan("gpu-a", nodes(w1={"ray": {"target": "/opt/ray/2.61.0"}}))
    assert "staged different Ray (/opt/ray/2.60.0, /opt/ray/2.61.0)" in plan["problems"][0]


def test_hosts_outside_a_limited_run_refuse_a_switch_and_stay_as_they_are_without_one():
    """site.yml --limit <new node>,<its head>: the nodes left out staged nothing in the run."""
    in_run = [n for n in nodes() if n["host"] != "w2"]
    plan = cluster_plan("gpu-a", in_run, ["w2"])
    assert plan["problems"] == [
        "cluster gpu-a: Ray change on head, w1, which restarts every node of the cluster, but w2 is outside this run "
        "(--limit): run again with the whole cluster in the limit, or without --limit."
    ]
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]})
    plan = cluster_plan("gpu-a", [n for n in nodes(**done) if n["host"] != "w2"], ["w2"])
    assert plan["action"] == "none" and plan["problems"] == []
    assert "cluster gpu-a: w2 outside this run (--limit): not touched" in plan["lines"]


def test_a_start_flag_change_alone_restarts_ray_like_an_upgrade_and_switches_no_link():
    """ray_num_gpus changed on one worker, versions unchanged: the switch writes Ray's files, restarts the head and
    every worker behind the router, gates, and on a failed gate puts the files back."""
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]})
    done["w1"] = dict(done["w1"], ray_files="ray-worker.service")
    plan = cluster_plan("gpu-a", nodes(**done))
    assert plan["action"] == "ray" and plan["problems"] == []
    assert plan["switch"] == [] and plan["rollback"] == []
    text = "\n".join(plan["lines"])
    assert "Ray's ray-worker.service on w1 change: written before Ray restarts; restart the head, then" in text
    assert "back to Ray's files, same order" in text and plan["back"] == "Ray's files"


def test_a_start_flag_change_with_a_ray_upgrade_restarts_ray_once():
    plan = cluster_plan("gpu-a", nodes(**every(ray_files="ray.env and ray-head.service")))
    assert plan["action"] == "ray" and len(plan["switch"]) == 6
    text = "\n".join(plan["lines"])
    assert "Ray's ray.env and ray-head.service on head, w1, w2 change: written before Ray restarts\n" in text + "\n"
    assert text.count("restart the head") == 1
    assert plan["back"] == "Ray 2.59.0, vLLM 0.31.0-ray2.59.0, Ray's files"


def test_a_start_flag_change_beside_a_new_node_is_left_to_the_phases():
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]}, ray_files="ray.env")
    done["w2"] = {"ray": {"current": None}, "vllm": {"current": None}, "model": {"current": None}}
    plan = cluster_plan("gpu-a", nodes(**done))
    assert plan["action"] == "install" and plan["problems"] == []


def test_a_start_flag_change_with_nodes_outside_the_limit_is_refused():
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]})
    done["w1"] = dict(done["w1"], ray_files="ray.env")
    plan = cluster_plan("gpu-a", [n for n in nodes(**done) if n["host"] != "w2"], ["w2"])
    assert plan["action"] == "ray"
    assert "Ray change on w1, which restarts every node of the cluster, but w2 is outside" in plan["problems"][0]


def test_the_reason_names_what_restarts_the_cluster():
    assert cluster_plan("gpu-a", nodes())["reason"] == "new versions or weights"
    done = every(ray={"current": RAY["target"]}, vllm={"current": VLLM["target"]}, ray_files="ray.env")
    assert cluster_plan("gpu-a", nodes(**done))["reason"] == "Ray's changed start flags or environment"
    assert cluster_plan("gpu-a", nodes(**every(ray_files="ray.env")))["reason"] == (
        "new versions or weights and Ray's changed start flags or environment"
    )
