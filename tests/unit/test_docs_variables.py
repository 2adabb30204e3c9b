"""docs/variables.md is generated from roles/*/meta/argument_specs.yml (scripts/docs-variables.py) and kept
in step with them: a changed argument spec without the regenerated page fails here."""

import importlib.util
import shutil
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "docs-variables.py"
_spec = importlib.util.spec_from_file_location("docs_variables", SCRIPT)
docs_variables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_variables)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_the_variables_page_matches_the_argument_specs():
    proc = run("--check")
    assert proc.returncode == 0, proc.stderr


def test_a_changed_spec_makes_the_page_stale_and_the_check_names_it(tmp_path):
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        target = tmp_path / spec.relative_to(ROOT)
        target.parent.mkdir(parents=True)
        shutil.copy(spec, target)
    assert run("--root", str(tmp_path)).returncode == 0
    assert run("--root", str(tmp_path), "--check").returncode == 0
    spec = tmp_path / "roles" / "ray" / "meta" / "argument_specs.yml"
    spec.write_text(spec.read_text().replace("default: 8265", "default: 8266", 1))
    proc = run("--root", str(tmp_path), "--check")
    assert proc.returncode == 1
    assert "docs/variables.md is stale" in proc.stderr and "scripts/docs-variables.py" in proc.stderr


def test_a_missing_page_is_stale(tmp_path):
    (tmp_path / "roles").mkdir()
    proc = run("--root", str(tmp_path), "--check")
    assert proc.returncode == 1 and "docs/variables.md" in proc.stderr


def test_markup_becomes_markdown():
    markup = docs_variables.markup
    assert markup("Set C(ray_user) or O(vllm_port=8000), see I(ray_group).") == (
        "Set `ray_user` or `vllm_port=8000`, see *ray_group*."
    )
    assert markup("V(token), M(rayvllm.fleet.venv_prune), B(never)") == (
        "`token`, `rayvllm.fleet.venv_prune`, **never**"
    )
    # Nested parentheses stay inside the code span; a backtick inside one gets a longer fence.
    assert markup("each C({ports, proto (tcp|udp)}).") == "each `{ports, proto (tcp|udp)}`."
    assert markup("C(a`b)") == "``a`b``"
    assert markup("U(https://docs.ray.io) and L(Ray docs, https://docs.ray.io)") == (
        "<https://docs.ray.io> and [Ray docs](https://docs.ray.io)"
    )
    # Plain text that Markdown would read as emphasis or HTML is escaped; ray_user inside a word is not.
    assert markup("ray_*_port variables, <major>, ray_user") == r"ray\_\*\_port variables, \<major\>, ray_user"


def test_table_cells_escape_pipes_and_show_required_and_secret_options():
    lines = docs_variables._options_table(
        {
            "x_version": {"type": "str", "required": True, "description": "Exact X.Y.Z."},
            "x_key": {"type": "str", "default": "", "no_log": True, "description": "A key."},
            "x_url": {"type": "str", "default": "{{ a | default('b') }}", "choices": ["a", "b"], "description": "U."},
        }
    )
    assert lines[2] == "| `x_version` | str | **required** | Exact X.Y.Z. |"
    assert lines[3] == '| `x_key` | str | `""` | A key.<br><br>Secret: never logged (`no_log`). |'
    assert lines[4] == "| `x_url` | str | `{{ a \\| default('b') }}` | U.<br><br>One of `a`, `b`. |"
