"""Roles meet only through what they declare: no role, and no playbook, reads or sets another role's private
(``__<role>_``) variables, and every role result the rollout reads (``<role>_result``) is declared in that role's
argument spec (roles/fleet_facts states the rule; issue 55)."""

import re

import pytest
from conftest import ROOT

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
PRIVATE = re.compile(r"(?<![A-Za-z0-9_])__([a-z][a-z0-9_]*)")
RESULT = re.compile(r"(?<![A-Za-z0-9_])([a-z][a-z0-9_]*)_result\b")
# The rollout: the playbook that switches a cluster and the role it calls for plan, switch, rollback and report.
ROLLOUT = [ROOT / "playbooks" / "switch.yml", *sorted((ROOT / "roles" / "upgrade" / "tasks").glob("*.yml"))]


def owner(name):
    """The role whose private variable ``__<name>`` is (the longest role name it starts with), or None."""
    owners = [role for role in ROLES if name == role or name.startswith(role + "_")]
    return max(owners, key=len) if owners else None


def code_lines(path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.lstrip().startswith("#"):
            yield number, line


def foreign_privates(path, own_role):
    """``file:line: __name (role)`` for each private variable of a role other than ``own_role`` in ``path``."""
    found, label = [], path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for number, line in code_lines(path):
        for match in PRIVATE.finditer(line):
            role = owner(match.group(1))
            if role and role != own_role:
                found.append(f"{label}:{number}: __{match.group(1)} ({role})")
    return found


def role_files(role):
    base = ROOT / "roles" / role
    return sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".j2"))


@pytest.mark.parametrize("role", ROLES)
def test_no_role_reads_or_sets_another_roles_private_variables(role):
    found = [line for path in role_files(role) for line in foreign_privates(path, role)]
    assert not found, "declare a result or an option instead: " + "; ".join(found)


def test_no_playbook_reads_or_sets_a_roles_private_variables():
    playbooks = sorted((ROOT / "playbooks").glob("*.yml")) + [ROOT / "site.yml"]
    found = [line for path in playbooks for line in foreign_privates(path, None)]
    assert not found, "declare a result or an option instead: " + "; ".join(found)


def test_the_check_finds_a_private_read_across_roles(tmp_path):
    path = ROOT / "roles" / "upgrade" / "tasks" / "rollback.yml"
    text = path.read_text()
    assert not foreign_privates(path, "upgrade")
    mutated = tmp_path / "rollback.yml"
    mutated.write_text(text + '\n- ansible.builtin.debug:\n    msg: "{{ __vllm_unit }} {{ __ray_serve_apply }}"\n')
    found = [line.split(": ", 1)[1] for line in foreign_privates(mutated, "upgrade")]
    assert found == ["__vllm_unit (vllm)", "__ray_serve_apply (ray_serve)"]


def test_every_role_result_the_rollout_reads_is_declared_in_that_roles_spec():
    """The rollout reads one role's results: the serving interface's (roles/serving), the same for every mode."""
    read = {}
    for path in ROLLOUT:
        for number, line in code_lines(path):
            for match in RESULT.finditer(line):
                role = match.group(1)
                if role in ROLES:
                    read.setdefault(role, f"{path.relative_to(ROOT)}:{number}")
    assert set(read) == {"serving"}, read
    for role, where in read.items():
        spec = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text()
        assert f"C({role}_result)" in spec, (
            f"{where} reads {role}_result, which roles/{role}'s argument spec never declares"
        )


# What the serving interface publishes (roles/serving/meta/argument_specs.yml), which the rollout reads.
SERVING_FACTS = re.compile(r"(?<![A-Za-z0-9_])(serving_(?:plan|snapshot|result))\b")


def test_the_rollout_reads_what_the_serving_interface_declares():
    spec = (ROOT / "roles" / "serving" / "meta" / "argument_specs.yml").read_text()
    read = {m.group(1) for path in ROLLOUT for _n, line in code_lines(path) for m in SERVING_FACTS.finditer(line)}
    assert read == {"serving_plan", "serving_snapshot", "serving_result"}, read
    assert [name for name in sorted(read) if f"C({name})" not in spec] == []


# A line that branches on the serving mode: compares the mode, or compares something with a mode's name.
MODE = r"['\"](vllm_serve|ray_serve)['\"]"
MODE_BRANCH = re.compile(
    r"(vllm_serving_mode|serving\.mode)\s*(==|!=|\bin\b|\bnot in\b)"
    rf"|(==|!=|equalto['\"],)\s*{MODE}|{MODE}\s*(==|!=|\bin\b|\bnot in\b)"
)


def test_nothing_branches_on_the_serving_mode_outside_the_fleet_model_and_the_dispatcher():
    """The roles and playbooks read what a mode asks of them from the fleet model's table of modes
    (fleet_node.serving) and go through roles/serving for the serving steps: no line of theirs names a mode."""
    files = [
        *sorted((ROOT / "playbooks").glob("*.yml")),
        ROOT / "site.yml",
        *(
            path
            for role in ROLES
            if role != "serving"
            for part in ("tasks", "vars", "handlers", "defaults", "templates")
            for path in sorted((ROOT / "roles" / role / part).glob("*"))
            if path.suffix in (".yml", ".j2")
        ),
    ]
    assert len(files) > 100, len(files)
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in code_lines(path)
        if MODE_BRANCH.search(line)
    ]
    assert found == [], "\n".join(found)


def test_the_mode_branch_pattern_finds_the_branches_it_is_meant_to():
    for line in (
        "when: vllm_serving_mode == 'ray_serve'",
        'when: fleet_node.serving.mode != "vllm_serve"',
        "{{ ray_serve_models if s.vllm_serving_mode in ['ray_serve'] else [] }}",
        "| rejectattr('value.settings.vllm_serving_mode', 'equalto', 'vllm_serve')",
    ):
        assert MODE_BRANCH.search(line), line
    for line in ("tags: [vllm, vllm_serve]", "name: rayvllm.fleet.ray_serve", "input_problems('ray_serve', host)"):
        assert not MODE_BRANCH.search(line), line


def test_every_fact_the_rollout_plan_reads_from_a_node_is_declared_by_the_role_that_publishes_it():
    """The plan reads each node's staging facts (``hv.<fact>``): the ray, vllm and model roles declare them."""
    plan = ROOT / "roles" / "upgrade" / "tasks" / "plan.yml"
    read = {m.group(1) for _n, line in code_lines(plan) for m in re.finditer(r"\bhv\.([a-z][a-z0-9_]*)", line)}
    assert len(read) >= 8, read
    undeclared = []
    for fact in sorted(read - {"inventory_hostname"}):
        role = owner(fact)
        spec = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text() if role else ""
        if f"C({fact})" not in spec:
            undeclared.append(f"{fact} ({role})")
    assert undeclared == [], "the plan reads facts their roles never declare: " + ", ".join(undeclared)


# Python's own ways to compare with a mode's name (a .get(..., "vllm_serve") default, then ==).
PY_MODE_BRANCH = re.compile(rf"{MODE}\)?\s*(==|!=)|(==|!=)\s*{MODE}")


def test_the_python_reads_what_a_mode_asks_from_the_table_of_modes_too():
    """Only the table itself (fleet_model/settings.py: SERVING_MODES, and the one place a node's mode is resolved)
    names the modes: the fleet model, the checks and the planners read a mode's row (mode_row), so a third mode is a
    row of the table, not a search through the Python."""
    files = [
        path
        for path in sorted((ROOT / "plugins").rglob("*.py"))
        if path != ROOT / "plugins" / "module_utils" / "fleet_model" / "settings.py"
    ]
    assert len(files) > 50, len(files)
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PY_MODE_BRANCH.search(line) or MODE_BRANCH.search(line)
    ]
    assert found == [], "\n".join(found)
    assert PY_MODE_BRANCH.search('if head.get("vllm_serving_mode", "vllm_serve") == "vllm_serve":')
    assert PY_MODE_BRANCH.search('"restarts": node["serving"]["mode"] == "vllm_serve",')
