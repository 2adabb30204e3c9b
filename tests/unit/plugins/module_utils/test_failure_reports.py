"""The messages a failed serving change ends the run with: each outcome of a cluster's switch and of a ray_serve
cluster's Serve config (module_utils/planners/failure_reports.py)."""

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.failure_reports import (
    serve_failure,
    switch_failure,
)


# The message of a failed switch (roles/upgrade/tasks/failed.yml): each outcome, behind a router and without one.
FAILURE = "VLLM | wait until the server answers: the server exited before it answered /health"


def _failure(**kwargs):
    args = {"failure": FAILURE, "cluster": "gpu-a", "action": "ray", "touched": True}
    args.update(kwargs)
    return switch_failure(**args)


def test_a_rolled_back_cluster_behind_a_router_stays_out_of_its_rotation():
    report = _failure(back="Ray 2.59.0, vLLM 0.27.0", router_model="tiny-llama")
    assert report["outcome"] == "rolled-back"
    assert report["msg"] == (
        FAILURE + " ROLLED BACK: cluster gpu-a serves again on its previous versions (Ray 2.59.0, vLLM 0.27.0), gate "
        "passed, and stays out of the tiny-llama router's rotation until a run passes its gate. Clusters later in this "
        "run were not touched. Fix the cause and run again."
    )


def test_a_rolled_back_cluster_without_a_switch_or_a_router_says_neither():
    report = _failure(action="none")
    assert report["outcome"] == "rolled-back"
    assert report["msg"].endswith(
        " ROLLED BACK: cluster gpu-a serves again on its previous versions, gate passed. Clusters later in this run "
        "were not touched. Fix the cause and run again."
    )


def test_nothing_switched_or_restarted_serves_as_before_rolled_back_or_not():
    for rollback in (True, False):
        report = _failure(action="none", touched=False, rollback=rollback, router_model="m")
        assert report["outcome"] == "untouched"
        assert (
            report["msg"] == FAILURE + " Nothing had been switched or restarted on cluster gpu-a: it serves as before."
        )


def test_a_serve_config_put_back_by_the_ray_serve_role_without_a_version_switch():
    serve = {"serve_rolled_back": True, "served_before": True}
    report = _failure(action="none", router_model="tiny-llama", **serve)
    assert report["outcome"] == "serve"
    assert report["msg"] == (
        FAILURE + " Cluster gpu-a stays out of the tiny-llama router's rotation until a run passes its gate. Clusters "
        "later in this run were not touched."
    )
    assert _failure(action="none", **serve)["msg"] == FAILURE + " Clusters later in this run were not touched."
    # With a version switch, the upgrade role's rollback put Ray back too: rolled back, not only the Serve config.
    assert _failure(action="vllm", **serve)["outcome"] == "rolled-back"


def test_a_ray_serve_cluster_that_ran_no_application_before_serves_nothing_after_the_rollback():
    report = _failure(served_before=False, back="Ray 2.59.0", router_model="tiny-llama")
    assert report["outcome"] == "nothing-served"
    assert report["msg"] == (
        FAILURE + " Cluster gpu-a is back on Ray 2.59.0, but its Serve ran no application before this run, so no Serve "
        "config was put back: it serves nothing and stays out of the tiny-llama router's rotation until a run passes "
        "its gate. Clusters later in this run were not touched. Fix the cause and run site.yml or "
        "playbooks/upgrade.yml again."
    )
    assert " Cluster gpu-a: its Serve ran no application" in _failure(served_before=False)["msg"]
    # Not rolled back: left as it failed, whatever Serve ran before.
    assert _failure(served_before=False, rollback=False)["outcome"] == "left"


def test_a_cluster_not_rolled_back_is_left_as_it_failed():
    report = _failure(rollback=False, router_model="tiny-llama")
    assert report["outcome"] == "left"
    assert report["msg"] == FAILURE + " NOT rolled back (upgrade_rollback: false): cluster gpu-a is left as it failed."


# A ray_serve cluster's new Serve config that failed (roles/ray_serve/tasks/rollback.yml).
SERVE_FAILURE = "Ray Serve | apply the config on cluster b: LLMServer:tiny-chat DEPLOY_FAILED"


def test_a_serve_config_of_before_that_runs_again_names_the_models_that_answered():
    report = serve_failure(SERVE_FAILURE, "b", sent=True, rolled_back=True, previous_models=["tiny-llama", "tiny-chat"])
    assert report == {
        "outcome": "rolled-back",
        "msg": SERVE_FAILURE + " ROLLED BACK: cluster b serves its Serve config of before again (tiny-llama, tiny-chat "
        "answered). Fix the cause and run again.",
    }


def test_nothing_sent_to_serve_serves_as_before():
    for rollback in (True, False):
        report = serve_failure(SERVE_FAILURE, "b", sent=False, rollback=rollback)
        assert report["outcome"] == "unsent"
        assert report["msg"] == SERVE_FAILURE + " Nothing was sent to Serve: cluster b serves as before."


def test_a_serve_config_not_rolled_back_is_left_as_it_failed():
    report = serve_failure(SERVE_FAILURE, "b", sent=True, rollback=False)
    assert report["outcome"] == "left"
    assert report["msg"].endswith(" NOT rolled back (ray_serve_rollback: false): cluster b is left as it failed.")


def test_a_serve_that_ran_nothing_before_has_nothing_to_put_back():
    report = serve_failure(SERVE_FAILURE, "b", sent=True)
    assert report["outcome"] == "nothing-before"
    assert report["msg"] == (
        SERVE_FAILURE + " Serve ran no application on cluster b before this apply (a first start, or Ray restarted in "
        "this run): nothing to put back here (an upgrade puts back Ray and the Serve config of before next)."
    )
