"""The changelog: antsibull-changelog's lint, the fragments' shape, and a release made from them.

The release runs in a copy (galaxy.yml and changelogs/ only), so the checkout's fragments stay where they are.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHANGELOGS = REPO / "changelogs"
FRAGMENTS = CHANGELOGS / "fragments"
TOOL = Path(sys.executable).parent / "antsibull-changelog"
RELEASE_DATE = "2026-12-01"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # ansible-doc (which a release calls to list new plugins) comes from the same virtualenv.
    env = dict(os.environ, PATH=os.pathsep.join([str(TOOL.parent), os.environ.get("PATH", "")]))
    return subprocess.run([str(TOOL), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def _config() -> dict:
    with (CHANGELOGS / "config.yaml").open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _fragments() -> dict[str, dict]:
    loaded = {}
    for path in sorted(FRAGMENTS.glob("*.yml")) + sorted(FRAGMENTS.glob("*.yaml")):
        with path.open(encoding="utf-8") as handle:
            loaded[path.name] = yaml.safe_load(handle)
    return loaded


def _words(text: str) -> str:
    """Letters and digits only, lower case, single spaces: RST and Markdown markup, escapes and wrapping drop out."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", text))
    return " ".join(re.sub(r"[^0-9a-z]+", " ", plain.lower()).split())


def _next_version() -> str:
    with (CHANGELOGS / "changelog.yaml").open(encoding="utf-8") as handle:
        releases = yaml.safe_load(handle)["releases"]
    major, minor = max(tuple(int(part) for part in version.split(".")) for version in releases)[:2]
    return f"{major}.{minor + 1}.0"


def test_antsibull_changelog_lint_passes() -> None:
    result = _run(["lint"], REPO)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_fragments_have_known_sections_and_non_empty_entries() -> None:
    config = _config()
    known = {key for key, _title in config["sections"]} | {config["trivial_section_name"]}
    fragments = _fragments()
    for name, content in fragments.items():
        assert isinstance(content, dict) and content, f"{name}: not a mapping of sections"
        assert set(content) <= known, f"{name}: unknown sections {sorted(set(content) - known)}"
        for section, entries in content.items():
            assert isinstance(entries, list) and entries, f"{name}: {section} is not a list of entries"
            for entry in entries:
                assert isinstance(entry, str) and entry.strip(), f"{name}: {section} has an empty or non-text entry"


def test_release_lists_every_fragment_and_removes_them(tmp_path: Path) -> None:
    fragments = _fragments()
    if not fragments:
        pytest.skip("no unreleased fragments")
    shutil.copy2(REPO / "galaxy.yml", tmp_path / "galaxy.yml")
    shutil.copytree(CHANGELOGS, tmp_path / "changelogs", ignore=shutil.ignore_patterns(".plugin-cache.yaml"))
    version = _next_version()

    result = _run(["release", "--version", version, "--date", RELEASE_DATE], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    changelog = (tmp_path / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = re.compile(r"^## v" + r"\\?\.".join(version.split(".")) + r"\s*$", re.MULTILINE)
    found = heading.search(changelog)
    assert found, f"no v{version} section in CHANGELOG.md"
    following = re.compile(r"^## v", re.MULTILINE).search(changelog, found.end())
    section = _words(changelog[found.end():following.start() if following else len(changelog)])
    for name, content in fragments.items():
        for entries in content.values():
            for entry in entries:
                assert _words(entry) in section, f"{name}: entry missing from v{version}: {entry[:80]}"

    released = yaml.safe_load((tmp_path / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))
    assert sorted(released["releases"][version]["fragments"]) == sorted(fragments)
    left = list((tmp_path / "changelogs" / "fragments").glob("*"))
    assert left == [], f"fragments kept after the release: {left}"
