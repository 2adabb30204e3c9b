# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The messages a failed serving change ends the run with: what failed, then where the cluster stands.

``switch_failure``: a cluster's switch (playbooks/switch.yml, the upgrade role's rescue); ``serve_failure``: a
ray_serve cluster's new Serve config (the ray_serve role's rescue). Each outcome is one branch, unit-tested.
Plain Python (no Ansible import): the filters ``rayvllm.fleet.upgrade_failure`` and ``rayvllm.fleet.ray_serve_failure``
call them.
"""


def _rotation(router_model):
    if not router_model:
        return ""
    return "stays out of the %s router's rotation until a run passes its gate" % router_model


def switch_failure(
    failure,
    cluster,
    action,
    back="",
    router_model="",
    touched=False,
    rollback=True,
    serve_rolled_back=False,
    served_before=True,
):
    """The message a failed switch of ``cluster`` ends the run with: ``failure`` (the failed task and its message),
    then where the cluster stands. One of five outcomes, in this order:

    - ``serve``: a ray_serve cluster's new Serve config failed without a version switch (``action`` not ``ray`` or
      ``vllm``) and the ray_serve role put the config of before back (``serve_rolled_back``);
    - ``untouched``: nothing had been switched or restarted (``touched`` false): it serves as before;
    - ``nothing-served``: rolled back (``rollback``), but nothing served before the switch (``served_before`` false,
      the serving interface's snapshot: a ray_serve cluster whose Serve ran no application): it serves nothing;
    - ``rolled-back``: rolled back to the previous versions (``back``: what served before, for the message) and its
      gate passed;
    - ``left``: not rolled back (``upgrade_rollback: false``): left as it failed.

    A cluster behind a router (``router_model``) stays out of its rotation in the first, third and fourth outcomes.
    Returns ``{"outcome", "msg"}``.
    """
    rotation = _rotation(router_model)
    later = "Clusters later in this run were not touched."
    if serve_rolled_back and action not in ("ray", "vllm"):
        outcome = "serve"
        where = ("Cluster %s %s. " % (cluster, rotation) if rotation else "") + later
    elif not touched:
        outcome = "untouched"
        where = "Nothing had been switched or restarted on cluster %s: it serves as before." % cluster
    elif rollback and not served_before:
        outcome = "nothing-served"
        where = (
            "Cluster %s%s Serve ran no application before this run, so no Serve config was put back: it serves "
            "nothing%s. %s Fix the cause and run site.yml or playbooks/upgrade.yml again."
        ) % (
            cluster,
            (" is back on %s, but its" % back) if back else ": its",
            (" and " + rotation) if rotation else "",
            later,
        )
    elif rollback:
        outcome = "rolled-back"
        where = (
            "ROLLED BACK: cluster %s serves again on its previous versions%s, gate passed%s. %s Fix the cause "
            "and run again."
        ) % (cluster, (" (%s)" % back) if back else "", (", and " + rotation) if rotation else "", later)
    else:
        outcome = "left"
        where = "NOT rolled back (upgrade_rollback: false): cluster %s is left as it failed." % cluster
    return {"outcome": outcome, "msg": "%s %s" % (failure, where)}


def serve_failure(failure, cluster, sent, rollback=True, rolled_back=False, previous_models=()):
    """The message of a ray_serve cluster whose new Serve config failed to apply or to pass its gate: ``failure``, then
    one of four outcomes, in this order:

    - ``rolled-back``: the config of before runs again and passed the gate (``rolled_back``; ``previous_models``
      answered);
    - ``unsent``: nothing was sent to Serve (``sent`` false): it serves as before;
    - ``left``: not rolled back (``ray_serve_rollback: false``): left as it failed;
    - ``nothing-before``: Serve ran no application before this apply (a first start, or Ray restarted in this run):
      nothing to put back here (an upgrade puts back Ray and the Serve config of before next).

    Returns ``{"outcome", "msg"}``.
    """
    if rolled_back:
        outcome = "rolled-back"
        where = (
            "ROLLED BACK: cluster %s serves its Serve config of before again (%s answered). Fix the cause and run "
            "again." % (cluster, ", ".join(previous_models))
        )
    elif not sent:
        outcome = "unsent"
        where = "Nothing was sent to Serve: cluster %s serves as before." % cluster
    elif not rollback:
        outcome = "left"
        where = "NOT rolled back (ray_serve_rollback: false): cluster %s is left as it failed." % cluster
    else:
        outcome = "nothing-before"
        where = (
            "Serve ran no application on cluster %s before this apply (a first start, or Ray restarted in this run): "
            "nothing to put back here (an upgrade puts back Ray and the Serve config of before next)." % cluster
        )
    return {"outcome": outcome, "msg": "%s %s" % (failure, where)}
