"""Every role's defaults/main.yml and meta/argument_specs.yml describe the same variables."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir()) if ROLES_DIR.is_dir() else []


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _main_options(role: str) -> dict:
    specs = _load(ROLES_DIR / role / "meta/argument_specs.yml")["argument_specs"]
    return specs["main"].get("options", {})


def test_roles_exist() -> None:
    assert ROLES, f"no role found under {ROLES_DIR}"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_specs_name_the_same_variables(role: str) -> None:
    defaults = set(_load(ROLES_DIR / role / "defaults/main.yml"))
    specs = set(_main_options(role))
    assert defaults - specs == set(), f"{role}: in defaults/main.yml but not in argument_specs"
    assert specs - defaults == set(), f"{role}: in argument_specs but not in defaults/main.yml"


@pytest.mark.parametrize("role", ROLES)
def test_public_variables_carry_the_role_prefix(role: str) -> None:
    bad = [name for name in _main_options(role) if not name.startswith(f"{role}_")]
    assert bad == [], f"{role}: variables without the '{role}_' prefix: {bad}"


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_typed_and_described(role: str) -> None:
    for name, option in _main_options(role).items():
        assert option.get("type"), f"{role}: {name} has no type"
        assert option.get("description"), f"{role}: {name} has no description"


@pytest.mark.parametrize("role", ROLES)
def test_role_has_a_readme_naming_every_variable(role: str) -> None:
    readme = (ROLES_DIR / role / "README.md").read_text()
    missing = [name for name in _main_options(role) if name not in readme]
    assert missing == [], f"{role}: README.md does not mention {missing}"
