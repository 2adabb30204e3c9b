"""Property-based test of the roles' input checks (issue 30): whatever type or shape one of a role's values has, its
check returns a list of messages and never raises (a Python error would reach the operator as a failed filter that
names neither the variable nor the host), and a value of a type the role's argument spec cannot take is named in one
of those messages (an empty list would let it pass preflight, and the role would refuse or misuse it later)."""

import os

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible_collections.rayvllm.fleet.plugins.module_utils import fleet_model as fm
from ansible_collections.rayvllm.fleet.plugins.module_utils.checks import inputs

from .roles import ROOT, role_defaults

# Each check's variables: its role's defaults (the values it sees when the inventory sets nothing).
ROLE_OF = {name: ("preflight" if name.startswith("preflight") else name) for name in inputs.ROLES}
DEFAULTS = {role: role_defaults(role) for role in set(ROLE_OF.values())}
SHARED = fm.literal_defaults({role: role_defaults(role) for role in fm.SHARED_SETTINGS})


def _declared(role):
    """{variable: its declared type} of roles/<role>/meta/argument_specs.yml, read here (not by the checks' code)."""
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"].get("options") or {}
    return {variable: (option or {}).get("type", "str") for variable, option in options.items()}


DECLARED = {name: _declared(module) for name, (module, _function) in inputs.ROLES.items()}


def plainly_wrong(declared, value):
    """Whether no reading of the declared type takes ``value``: not a list for a list, not a mapping for a mapping, a
    list or mapping for anything else, a boolean for a string, path or number. None (not set) is left to the checks."""
    if value is None or declared is None or declared == "raw":
        return False
    if declared == "list":
        return not isinstance(value, (list, tuple))
    if declared == "dict":
        return not isinstance(value, dict)
    return isinstance(value, (list, tuple, dict)) or (isinstance(value, bool) and declared != "bool")


def _facts(ip):
    return {"default_ipv4": {"address": ip, "interface": "eth0"}, "interfaces": ["lo", "eth0"],
            "eth0": {"device": "eth0", "ipv4": {"address": ip}}}  # fmt: skip


PINNED = {"ray_version": "2.60.0", "vllm_version": "0.32.0", "ray_num_gpus": 2}
HOSTS = {
    "gpu-1": {"vars": dict(PINNED), "facts": _facts("10.0.0.1")},
    "gpu-2": {"vars": dict(PINNED), "facts": _facts("10.0.0.2")},
    "mon-1": {"vars": {}, "facts": _facts("10.0.0.9")},
}
MODEL, _PROBLEMS = fm.build(["gpu-1"], ["gpu-2"], HOSTS, SHARED, ["mon-1"], ["mon-1"])

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["", "0", "22/tcp", "0.0.0.0/0", "/", "/srv/models/../x", "a\nb", "--port", "admin ", "::1"]),
    st.lists(st.one_of(st.text(max_size=6), st.integers(), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=6), st.integers(), st.none()), max_size=3),
    st.lists(
        st.dictionaries(st.sampled_from(["ports", "sources", "proto", "name", "url"]), st.text(max_size=5)), max_size=2
    ),
)


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(inputs.ROLES)))
    values = dict(DEFAULTS[ROLE_OF[name]])
    changed = draw(st.lists(st.sampled_from(sorted(values) or ["x"]), max_size=3, unique=True))
    for key in changed:
        values[key] = draw(ANY)
    host = draw(st.sampled_from(["gpu-1", "gpu-2", "mon-1", "elsewhere"]))
    probe = st.dictionaries(st.sampled_from(["paths", "firewalls", "listening", "python", "firewalld_zones"]), ANY)
    keys = st.sampled_from(["probe", "ray_members", "python", "gpus", "connection", "facts", "model_source"])
    context = draw(st.one_of(st.just({}), st.fixed_dictionaries({"probe": probe}), st.dictionaries(keys, ANY)))
    return name, values, host, context, changed


@settings(
    max_examples=int(os.environ.get("INPUTS_EXAMPLES", "400")),
    derandomize=os.environ.get("INPUTS_RANDOM") != "1",
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# At least one plainly wrong value, whatever INPUTS_EXAMPLES says: a string where the role loops over a list.
@example(
    ("firewall", dict(DEFAULTS["firewall"], firewall_admin_cidrs="10.0.0.0/8"), "gpu-1", {}, ["firewall_admin_cidrs"])
)
@given(cases())
def test_a_check_names_problems_and_never_raises(case):
    name, values, host, context, changed = case
    found = inputs.problems(name, values, host, MODEL, context)
    assert isinstance(found, list) and all(isinstance(p, str) and p for p in found)
    for key in changed:
        if plainly_wrong(DECLARED[name].get(key), values[key]):
            named = [p for p in found if key in p]
            assert named, "%s: %s=%r on %s is named in none of %r" % (name, key, values[key], host, found)
