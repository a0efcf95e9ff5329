"""The host's apt sources: the Debian archive this machine already uses, so the lab uses the same one.

One parser for both formats serves the node images (archive and security mirrors) and the
Kubernetes build (the ``deb-src`` entry for bookworm).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FALLBACK_ARCHIVE = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` entry of the host's apt configuration."""

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str | None


@dataclass(frozen=True)
class Mirrors:
    archive: str
    security: str


def _deb822_fields(paragraph: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = ""
    for line in paragraph.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t" and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, _sep, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
    return fields


def parse_deb822_sources(text: str) -> list[AptSource]:
    """The enabled ``deb`` entries of a deb822 ``.sources`` file (comments ignored)."""
    entries: list[AptSource] = []
    for paragraph in re.split(r"\n\s*\n", text):
        fields = _deb822_fields(paragraph)
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        entries += [
            AptSource(uri, tuple(fields.get("suites", "").split()), tuple(fields.get("components", "").split()),
                      fields.get("signed-by"))
            for uri in fields.get("uris", "").split()
        ]
    return entries


def _signed_by(options: list[str]) -> str | None:
    return next((option.split("=", 1)[1] for option in options if option.startswith("signed-by=")), None)


def parse_one_line_sources(text: str) -> list[AptSource]:
    """The ``deb`` entries of one-line ``sources.list`` text."""
    entries: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        words = line.split()[1:]
        options: list[str] = []
        if words and words[0].startswith("["):
            while words:
                word = words.pop(0)
                options.append(word.strip("[]"))
                if word.endswith("]"):
                    break
        if len(words) >= 3:
            entries.append(AptSource(words[0], (words[1],), tuple(words[2:]), _signed_by(options)))
    return entries


def host_apt_sources(etc_apt: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every enabled ``deb`` entry of the host, in apt's file order."""
    files = [etc_apt / "sources.list"] + sorted((etc_apt / "sources.list.d").glob("*"))
    found: list[AptSource] = []
    for path in files:
        if path.is_file() and path.suffix == ".sources":
            found += parse_deb822_sources(path.read_text(errors="replace"))
        elif path.is_file() and path.suffix == ".list":
            found += parse_one_line_sources(path.read_text(errors="replace"))
    return found


def choose(uris: list[str]) -> Mirrors:
    archive = next((u for u in uris if u.rstrip("/").endswith("/debian")), FALLBACK_ARCHIVE).rstrip("/")
    security = next((u for u in uris if u.rstrip("/").endswith("/debian-security")), archive + "-security")
    return Mirrors(archive=archive, security=security.rstrip("/"))


def host_mirrors(etc_apt: Path = Path("/etc/apt")) -> Mirrors:
    return choose([source.uri for source in host_apt_sources(etc_apt)])
