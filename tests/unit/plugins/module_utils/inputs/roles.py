"""The roles' defaults, as a role's validate task hands its variables to the input checks when the inventory sets
nothing."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[5]


def role_defaults(role, **settings):
    """roles/<role>/defaults/main.yml, then the settings over it."""
    values = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    values.update(settings)
    return values
