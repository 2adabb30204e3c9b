"""The code outside plugins/ that reaches into the collection (the sandbox's stages and tests, the benchmarks, the
scripts) names modules that exist: a move inside plugins/module_utils must move those imports too. Stage tests run
only in the sandbox, so a stale import there would otherwise surface only after the whole converge."""

import ast
import subprocess
import sys

from conftest import ROOT

PREFIX = "ansible_collections.rayvllm.fleet."
OUTSIDE = ("molecule", "benchmarks", "scripts", "tests/integration")


def _imports(path):
    """(line, module path under the collection, imported names) of every import of the collection in one file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
            yield node.lineno, node.module[len(PREFIX) :], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    yield node.lineno, alias.name[len(PREFIX) :], []


def _exists(dotted):
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or base.is_dir()


def test_every_import_of_the_collection_from_outside_plugins_names_a_module_or_package_that_exists():
    missing = []
    for top in OUTSIDE:
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, module, names in _imports(path):
                if not _exists(module):
                    missing.append(f"{path.relative_to(ROOT)}:{line}: {module}")
                    continue
                package = ROOT.joinpath(*module.split("."))
                if package.is_dir():
                    # `from package import name`: a submodule, or a name the package's __init__ defines.
                    init = (package / "__init__.py").read_text() if (package / "__init__.py").is_file() else ""
                    for name in names:
                        if not _exists(f"{module}.{name}") and name not in init:
                            missing.append(f"{path.relative_to(ROOT)}:{line}: {module}.{name}")
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_the_serving_modes_extra_packages_reach_the_sandbox_wheelhouse():
    """scripts/sandbox-prereqs.sh downloads what scripts/serving-requirements.py prints (the table of modes)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "serving-requirements.py")], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "pyarrow>=17.0.0" in out and "hf_transfer" in out
    assert len(out) == len(set(out))
    assert "serving-requirements.py" in (ROOT / "scripts" / "sandbox-prereqs.sh").read_text()
