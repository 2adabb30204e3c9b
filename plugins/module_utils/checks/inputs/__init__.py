# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Each role's input checks, as plain Python: one function per role that takes the role's variables (as the role
sees them, defaults included), the host, the fleet model and what else the role knows (``context``), and returns
one list of problems, each naming the variable, the host or cluster, the value and the fix (secrets are never
shown). The roles' tasks/validate.yml fail when that list is not empty (filter ``rayvllm.fleet.input_problems``).

Plain Python, no Ansible import; the unit tests call the functions directly.
"""

from importlib import import_module

# role checked: (module of this package, its function). Imported on first use: a validate task's worker process
# imports only the checks of the role it runs (see plugins/filter/input_problems.py).
ROLES = {
    "alertmanager": ("alertmanager", "problems"),
    "firewall": ("firewall", "problems"),
    "grafana": ("grafana", "problems"),
    "model": ("model", "problems"),
    "preflight": ("preflight", "problems"),
    "preflight_fleet": ("preflight", "fleet_problems"),
    "prometheus": ("prometheus", "problems"),
    "ray": ("ray", "problems"),
    "ray_serve": ("ray_serve", "problems"),
    "router": ("router", "problems"),
    "vllm": ("vllm", "problems"),
    "vllm_watchdog": ("vllm_watchdog", "problems"),
}


def problems(role, values, host, model=None, context=None):
    """The problems of ``role``'s inputs on ``host`` (a list of messages, empty when they are usable)."""
    if role not in ROLES:
        raise ValueError("no input checks for role %r (known: %s)" % (role, ", ".join(sorted(ROLES))))
    module, function = ROLES[role]
    check = getattr(import_module("%s.%s" % (__name__, module)), function)
    values = values if isinstance(values, dict) else {}
    found = check(values, str(host), model or {}, context or {})
    # Then each value the role's own checks did not name, against the role's argument spec (inputs/spec.py).
    return found + import_module("%s.spec" % __name__).problems(module, values, str(host), found)


def preload():
    """Import every role's checks (plugins/vars/preload.py calls this in the controller's main process, so that the
    worker processes Ansible forks for each task inherit them)."""
    for module, _function in ROLES.values():
        import_module("%s.%s" % (__name__, module))
