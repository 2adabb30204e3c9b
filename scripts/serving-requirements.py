"""Print the packages the serving modes add to vLLM's venv, one per word.

The fleet model's table of serving modes (SERVING_MODES) is the one place that lists them; the sandbox's
wheelhouse must hold them (scripts/sandbox-prereqs.sh). The module is loaded from its file: it imports only the
standard library, so no Ansible is needed here.
"""

import importlib.util
import pathlib

SETTINGS = pathlib.Path(__file__).resolve().parent.parent / "plugins/module_utils/fleet_model/settings.py"


def main():
    spec = importlib.util.spec_from_file_location("fleet_settings", SETTINGS)
    settings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(settings)
    packages = []
    for mode in settings.SERVING_MODES.values():
        packages += [p for p in mode["venv_requirements"] if p not in packages]
    print(" ".join(packages))


if __name__ == "__main__":
    main()
