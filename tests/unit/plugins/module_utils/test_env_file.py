"""Environment files for systemd: every value quoted and escaped, bad input refused."""

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.planners.env_file import env_file, env_line


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("/var/lib/ray", 'HOME="/var/lib/ray"'),
        ('{"runtime_env": {"py_executable": "/opt/vllm/current/bin/python"}}',
         'X="{\\"runtime_env\\": {\\"py_executable\\": \\"/opt/vllm/current/bin/python\\"}}"'),
        ("a$b`c\\d", 'X="a\\$b\\`c\\\\d"'),
        (1, 'X="1"'),
        (True, 'X="1"'),
        (None, 'X=""'),
    ],
)  # fmt: skip
def test_values_are_quoted_and_escaped(value, line):
    assert env_line("HOME" if line.startswith("HOME") else "X", value) == line


def test_order_is_kept():
    assert env_file({"B": "2", "A": "1"}) == 'B="2"\nA="1"\n'
    assert env_file([("A", "1"), ("B", "2")]) == 'A="1"\nB="2"\n'


@pytest.mark.parametrize("key", ["1X", "A-B", "A B", ""])
def test_bad_names(key):
    with pytest.raises(ValueError, match="is not an environment variable name"):
        env_line(key, "v")


def test_multi_line_values_are_refused():
    with pytest.raises(ValueError, match="spans lines"):
        env_line("X", "a\nb")
