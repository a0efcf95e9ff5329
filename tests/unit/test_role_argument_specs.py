"""Every role's defaults/main.yml and meta/argument_specs.yml describe the same variables, and the role docs
generated from the specs (tools/role_docs.py, `make docs`) are up to date."""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES_DIR = REPO / "roles"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir()) if ROLES_DIR.is_dir() else []
# Types whose values are compared as strings, as Ansible converts them; the others are compared as values.
STRING_TYPES = {"str", "path"}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _specs(role: str) -> dict[str, dict]:
    return _load(ROLES_DIR / role / "meta/argument_specs.yml")["argument_specs"]


def _main_options(role: str) -> dict:
    return _specs(role)["main"].get("options", {})


def _defaults(role: str) -> dict:
    return _load(ROLES_DIR / role / "defaults/main.yml")


def _entry_point_options(role: str) -> Iterator[tuple[str, str, dict]]:
    """(entry point, option name, option) of every top-level option of every entry point."""
    for entry_point, spec in _specs(role).items():
        for name, option in (spec.get("options") or {}).items():
            yield entry_point, name, option


def _all_options(options: dict, prefix: str = "") -> Iterator[tuple[str, dict]]:
    """Every option with its suboptions, named as the generated doc names them (parent.child, list[].child)."""
    for name, option in options.items():
        yield prefix + name, option
        if option.get("options"):
            separator = "[]." if option.get("type") == "list" else "."
            yield from _all_options(option["options"], prefix + name + separator)


def _is_templated(value: object) -> bool:
    return isinstance(value, str) and "{{" in value


def _same(left: Any, right: Any) -> bool:
    """Equal values of equal types, all the way down (True is not 1, 60 is not 60.0)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    return left == right


def _agrees(kind: str, default: Any, spec_default: Any) -> bool:
    """defaults/main.yml's value and the spec's default (None when it has none) are the same."""
    if default is None or spec_default is None:
        return default is None and spec_default is None
    if kind in STRING_TYPES:
        return str(default) == str(spec_default)
    return _same(default, spec_default)


def _choice_violations(name: str, option: dict, value: Any) -> Iterator[str]:
    """Values outside an option's choices, also in the suboptions of a dict or a list of dicts."""
    if value is None or _is_templated(value):
        return
    choices = option.get("choices")
    if choices is not None:
        values = value if isinstance(value, list) and option.get("type") == "list" else [value]
        yield from (f"{name}: {item!r} not in {choices}" for item in values if item not in choices)
    suboptions = option.get("options") or {}
    items = value if isinstance(value, list) else [value]
    for item in (item for item in items if isinstance(item, dict)):
        for key, suboption in suboptions.items():
            yield from _choice_violations(f"{name}.{key}", suboption, item.get(key, suboption.get("default")))


def _missing_required(name: str, option: dict, value: Any) -> Iterator[str]:
    """Required suboptions that a default value (a dict or a list of dicts) lacks."""
    suboptions = option.get("options") or {}
    items = value if isinstance(value, list) else [value]
    for item in (item for item in items if isinstance(item, dict)):
        for key, suboption in suboptions.items():
            if suboption.get("required") and key not in item:
                yield f"{name}: {item!r} lacks the required {key}"
            yield from _missing_required(f"{name}.{key}", suboption, item.get(key))


@pytest.fixture(scope="module", name="role_docs")
def role_docs_module() -> ModuleType:
    """tools/role_docs.py, the generator of docs/roles/<role>.md (pytest.ini puts tools/ on the path)."""
    return importlib.import_module("role_docs")


def test_roles_exist() -> None:
    assert ROLES, f"no role found under {ROLES_DIR}"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_specs_name_the_same_variables(role: str) -> None:
    defaults = set(_defaults(role))
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
def test_spec_defaults_equal_the_literal_defaults(role: str) -> None:
    """A literal value in defaults/main.yml is the spec's default of that option, in every entry point."""
    defaults = _defaults(role)
    wrong = [
        f"{entry_point}: {name}: defaults/main.yml {defaults[name]!r}, spec {option.get('default', '(none)')!r}"
        for entry_point, name, option in _entry_point_options(role)
        if name in defaults and not _is_templated(defaults[name])
        and not _agrees(option.get("type", "str"), defaults[name], option.get("default"))
    ]
    assert wrong == [], f"{role}: {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_templated_defaults_are_not_given_another_spec_default(role: str) -> None:
    """A templated default has no spec default, or exactly the same string."""
    defaults = _defaults(role)
    wrong = [
        f"{entry_point}: {name}: defaults/main.yml {defaults[name]!r}, spec {option['default']!r}"
        for entry_point, name, option in _entry_point_options(role)
        if _is_templated(defaults.get(name)) and "default" in option and option["default"] != defaults[name]
    ]
    assert wrong == [], f"{role}: {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_are_among_the_choices(role: str) -> None:
    """The literal default (defaults/main.yml and spec) of an option with choices is one of them, each element of a list."""
    defaults = _defaults(role)
    wrong = []
    for entry_point, name, option in _entry_point_options(role):
        for value in (defaults.get(name), option.get("default")):
            wrong += [f"{entry_point}: {problem}" for problem in _choice_violations(name, option, value)]
    assert wrong == [], f"{role}: {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_default_values_carry_the_required_suboptions(role: str) -> None:
    defaults = _defaults(role)
    wrong = []
    for entry_point, name, option in _entry_point_options(role):
        for value in (defaults.get(name), option.get("default")):
            wrong += [f"{entry_point}: {problem}" for problem in _missing_required(name, option, value)]
    assert wrong == [], f"{role}: {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_required_options_have_no_default(role: str) -> None:
    defaults = _defaults(role)
    wrong = [
        f"{entry_point}: {name}" for entry_point, name, option in _entry_point_options(role)
        if option.get("required") and (name in defaults or "default" in option)
    ]
    assert wrong == [], f"{role}: required, yet with a default (defaults/main.yml or spec): {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_generated_doc_is_up_to_date(role_docs: ModuleType, role: str) -> None:
    doc = Path("docs/roles") / f"{role}.md"
    assert doc not in role_docs.stale_files(REPO), f"{doc} is missing or out of date: run `make docs`"


def test_no_generated_doc_outlived_its_role(role_docs: ModuleType) -> None:
    orphans = [path for path in role_docs.stale_files(REPO) if path.stem not in ROLES]
    assert orphans == [], f"generated docs of roles that are gone: {orphans}: run `make docs`"


@pytest.mark.parametrize("role", ROLES)
def test_generated_doc_names_every_option(role: str) -> None:
    path = REPO / "docs/roles" / f"{role}.md"
    doc = path.read_text() if path.is_file() else ""
    missing = [
        f"{entry_point}: {name}"
        for entry_point, spec in _specs(role).items()
        for name, _option in _all_options(spec.get("options") or {})
        if f"| `{name}` |" not in doc
    ]
    assert missing == [], f"docs/roles/{role}.md does not document {missing}: run `make docs`"
