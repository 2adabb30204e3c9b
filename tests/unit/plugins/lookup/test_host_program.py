"""The host programs' one home: each name reads its plugins/module_utils file byte for byte; others are
refused."""

from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.rayvllm.fleet.plugins.lookup.host_program import HOST_PROGRAMS, LookupModule

MODULE_UTILS = Path(__file__).resolve().parents[4] / "plugins/module_utils"


def test_each_program_is_its_module_utils_file_byte_for_byte():
    for name, source in HOST_PROGRAMS.items():
        (content,) = LookupModule().run([name])
        assert content == (MODULE_UTILS / source).read_text(encoding="utf-8")
        assert content.endswith("\n")


def test_an_unknown_program_is_refused_naming_the_ones_there_are():
    with pytest.raises(AnsibleLookupError, match=r"no host program named 'vllm_probe' \(there are vllm_probe.py, "):
        LookupModule().run(["vllm_probe"])


def test_the_roles_install_only_programs_the_lookup_knows():
    roles = Path(__file__).resolve().parents[4] / "roles"
    used = set()
    for tasks in roles.glob("*/tasks/*.yml"):
        text = tasks.read_text()
        assert "/../../plugins/module_utils" not in text, tasks
        used.update(part.split("'")[1] for part in text.split("lookup('rayvllm.fleet.host_program', ")[1:])
    assert used == set(HOST_PROGRAMS)
