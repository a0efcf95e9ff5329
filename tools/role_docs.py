"""Write docs/roles/<role>.md from every role's meta/argument_specs.yml.

    python tools/role_docs.py           write the files (make docs)
    python tools/role_docs.py --check   write nothing; exit 1 naming every file that is missing or
                                        differs from what would be written (make docs-lint)

The argument specs are the one source of the roles' variable documentation: types, defaults,
choices and descriptions. Ansible's documentation markup (C(), O(), V(), I(), B(), L(), U(), M(),
E(), RV(), P(), R()) becomes Markdown.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROLES_DIR = "roles"
DOCS_DIR = "docs/roles"
SPEC_FILE = "meta/argument_specs.yml"
NAMESPACE = "gpufleet.node"
GENERATED_MARK = "This file is generated from"
COLUMNS = ("option", "type", "required", "default", "choices", "description")

# A markup command starts at a word boundary: C( B( ... HORIZONTALLINE.
_COMMAND_RE = re.compile(r"\b(?:(RV|[BCEILMOPRUV])\(|(HORIZONTALLINE)\b)")
# Semantic markup (E, O, P, RV, V) escapes ")" and "\" with a backslash; classic markup ends at the first ")".
_ESCAPED = frozenset({"E", "O", "P", "RV", "V"})
_TWO_PARAMETERS = frozenset({"L", "R"})
_ESCAPE_OR_END = re.compile(r"\\(.)|(\))")
_PLUGIN_REF = re.compile(r"^([^.#]+\.[^.#]+\.[^#]+)#([a-z_]+):(.*)$")


# Ansible markup to Markdown


def code(text: str) -> str:
    """A Markdown code span holding text verbatim, whatever backticks it contains."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _option_name(text: str) -> str:
    """O() and RV(): the option (and value) shown as code, its plugin named when it is another one's."""
    name, sep, value = text.partition("=")
    if name.startswith("ignore:"):
        name = name[len("ignore:"):]
    match = _PLUGIN_REF.match(name)
    if not match:
        return code(name + sep + value)
    fqcn, plugin_type, name = match.groups()
    if plugin_type == "role":
        name = name.partition(":")[2]
    return f"{code(name + sep + value)} of {code(fqcn)}"


def _link(text: str, url: str) -> str:
    return f"[{text}]({url})"


_RENDERERS: dict[str, Callable[..., str]] = {
    "B": lambda text: f"**{text}**",
    "C": code,
    "E": code,
    "I": lambda text: f"*{text}*",
    "L": _link,
    "M": code,
    "O": _option_name,
    "P": lambda text: code(text.partition("#")[0]),
    "R": lambda text, _ref: text,
    "RV": _option_name,
    "U": lambda url: f"<{url}>",
    "V": code,
}


def _escaped_argument(text: str, start: int) -> tuple[str, int]:
    """The argument of a semantic command starting at start, and the index after its ")"."""
    parts: list[str] = []
    index = start
    for match in _ESCAPE_OR_END.finditer(text, start):
        parts.append(text[index:match.start()])
        index = match.end()
        if match.group(2):
            return "".join(parts), index
        parts.append(match.group(1))
    raise ValueError(f"no closing ')' in {text[start:]!r}")


def _classic_arguments(text: str, start: int, count: int) -> tuple[list[str], int]:
    """The arguments of a classic command starting at start, and the index after its ")"."""
    end = text.find(")", start)
    if end < 0:
        raise ValueError(f"no closing ')' in {text[start:]!r}")
    body = text[start:end]
    if count == 1:
        return [body], end + 1
    first, comma, rest = body.partition(",")
    if not comma:
        raise ValueError(f"two arguments expected in {body!r}")
    return [first.strip(), rest.strip()], end + 1


def _command(text: str, name: str, start: int) -> tuple[str, int]:
    """One command's Markdown and the index after it."""
    if name in _ESCAPED:
        argument, end = _escaped_argument(text, start)
        return _RENDERERS[name](argument), end
    arguments, end = _classic_arguments(text, start, 2 if name in _TWO_PARAMETERS else 1)
    return _RENDERERS[name](*arguments), end


def markup(text: str) -> str:
    """Ansible documentation markup converted to Markdown, whitespace runs made single spaces."""
    text = " ".join(text.split())
    out: list[str] = []
    index = 0
    while match := _COMMAND_RE.search(text, index):
        out.append(text[index:match.start()])
        if match.group(2):
            index = match.end()
            continue
        rendered, index = _command(text, match.group(1), match.end())
        out.append(rendered)
    out.append(text[index:])
    return " ".join("".join(out).split())


# Cells of the options table


def paragraphs(description: str | list[str] | None) -> list[str]:
    """A description (a string or a list of paragraphs) as Markdown paragraphs."""
    if description is None:
        return []
    items = [description] if isinstance(description, str) else description
    return [markup(str(item)) for item in items if str(item).strip()]


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def is_templated(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def literal(value: object) -> str:
    """A value as a JSON literal in a code span; a templated string as it is written."""
    if is_templated(value):
        return code(str(value))
    return code(json.dumps(value, ensure_ascii=False))


def type_of(option: Mapping[str, Any]) -> str:
    kind = str(option.get("type", "str"))
    elements = option.get("elements")
    return f"{kind} / elements={elements}" if elements else kind


def _row(name: str, option: Mapping[str, Any]) -> list[str]:
    choices = option.get("choices")
    return [
        code(name),
        type_of(option),
        "yes" if option.get("required") else "no",
        literal(option["default"]) if "default" in option else "",
        ", ".join(literal(choice) for choice in choices) if choices else "",
        "<br>".join(paragraphs(option.get("description"))),
    ]


def option_rows(options: Mapping[str, Any], prefix: str = "") -> Iterator[list[str]]:
    """One row per option in the spec's order, each suboption after its parent (parent.child, list[].child)."""
    for name, option in options.items():
        full_name = prefix + name
        yield _row(full_name, option)
        suboptions = option.get("options")
        if suboptions:
            separator = "[]." if option.get("type") == "list" else "."
            yield from option_rows(suboptions, full_name + separator)


def table(options: Mapping[str, Any]) -> list[str]:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in option_rows(options):
        lines.append("| " + " | ".join(cell(value) for value in row) + " |")
    return lines


# Documents


def entry_points(specs: Mapping[str, Any]) -> list[str]:
    """main first, then the others alphabetically."""
    return sorted(specs, key=lambda name: (name != "main", name))


def render_entry_point(name: str, spec: Mapping[str, Any]) -> list[str]:
    """An entry point's section; main's short description is the document's own and is not repeated."""
    lines = [f"## Entry point `{name}`", ""]
    if spec.get("short_description") and name != "main":
        lines += [f"**{markup(str(spec['short_description']))}**", ""]
    for paragraph in paragraphs(spec.get("description")):
        lines += [paragraph, ""]
    options = spec.get("options") or {}
    lines += table(options) if options else ["No options."]
    return lines + [""]


def render_role(role: str, specs: Mapping[str, Any]) -> str:
    summary = specs.get("main", {}).get("short_description", "")
    lines = [
        f"# {NAMESPACE}.{role}",
        "",
        f"<!-- {GENERATED_MARK} {ROLES_DIR}/{role}/{SPEC_FILE} by `make docs` (tools/role_docs.py).",
        "     Do not edit it by hand: change the argument spec and run `make docs`. -->",
        "",
    ]
    if summary:
        lines += [markup(str(summary)), ""]
    lines += [
        "The role's variables, per entry point. Defaults are shown as JSON literals, a templated default as written.",
        "",
    ]
    for name in entry_points(specs):
        lines += render_entry_point(name, specs[name])
    return "\n".join(lines).rstrip("\n") + "\n"


def load_specs(spec_path: Path) -> dict[str, Any]:
    with spec_path.open(encoding="utf-8") as stream:
        data = yaml.safe_load(stream) or {}
    specs = data.get("argument_specs")
    if not isinstance(specs, dict) or not specs:
        raise ValueError("no argument_specs mapping")
    return specs


def roles(root: Path = ROOT) -> list[str]:
    """The roles that have an argument spec, sorted."""
    return sorted(path.parent.parent.name for path in (root / ROLES_DIR).glob(f"*/{SPEC_FILE}"))


def _document(root: Path, role: str) -> str:
    spec_path = root / ROLES_DIR / role / SPEC_FILE
    try:
        return render_role(role, load_specs(spec_path))
    except ValueError as error:
        raise ValueError(f"{spec_path.relative_to(root)}: {error}") from error


def generate(root: Path = ROOT) -> dict[Path, str]:
    """Every document, by its path relative to root."""
    return {Path(DOCS_DIR) / f"{role}.md": _document(root, role) for role in roles(root)}


def orphans(root: Path, wanted: Mapping[Path, str]) -> list[Path]:
    """Generated documents of roles that no longer exist."""
    found = sorted((root / DOCS_DIR).glob("*.md"))
    return [
        path.relative_to(root) for path in found
        if path.relative_to(root) not in wanted and GENERATED_MARK in path.read_text(encoding="utf-8")
    ]


def _differs(path: Path, content: str) -> bool:
    return not path.is_file() or path.read_text(encoding="utf-8") != content


def stale_files(root: Path = ROOT) -> list[Path]:
    """Documents (relative to root) that are missing, differ from what would be written, or outlived their role."""
    wanted = generate(root)
    stale = [path for path, content in wanted.items() if _differs(root / path, content)]
    return sorted(stale + orphans(root, wanted))


def write(root: Path = ROOT) -> list[str]:
    """Write every document that changed and remove orphans; one line per file touched."""
    wanted = generate(root)
    report = []
    for path, content in wanted.items():
        if _differs(root / path, content):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(content, encoding="utf-8")
            report.append(f"wrote {path}")
    for path in orphans(root, wanted):
        (root / path).unlink()
        report.append(f"removed {path} (its role is gone)")
    return report


def _why_stale(root: Path, path: Path) -> str:
    if not (root / path).is_file():
        return "missing"
    if path.stem not in roles(root):
        return "generated for a role that is gone"
    return "differs from meta/argument_specs.yml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/roles/<role>.md from meta/argument_specs.yml.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a document is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"{path}: {_why_stale(ROOT, path)}; run `make docs`", file=sys.stderr)
        return 1 if stale else 0
    for line in write():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
