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
    read = {}
    for path in ROLLOUT:
        for number, line in code_lines(path):
            for match in RESULT.finditer(line):
                role = match.group(1)
                if role in ROLES:
                    read.setdefault(role, f"{path.relative_to(ROOT)}:{number}")
    assert {"vllm", "ray_serve"} <= set(read), read
    for role, where in read.items():
        spec = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text()
        assert f"C({role}_result)" in spec, (
            f"{where} reads {role}_result, which roles/{role}'s argument spec never declares"
        )
