"""Find the Debian archive this machine already uses, so the lab's images use the same one."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FALLBACK_ARCHIVE = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Mirrors:
    archive: str
    security: str


def _uris_from_deb822(text: str) -> list[str]:
    return [uri for line in text.splitlines() if line.startswith("URIs:") for uri in line.split()[1:]]


def _uris_from_one_line(text: str) -> list[str]:
    uris = []
    for line in text.splitlines():
        match = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)", line)
        if match:
            uris.append(match.group(1))
    return uris


def parse_uris(sources: dict[str, str]) -> list[str]:
    """URIs of every apt source, in file order: deb822 `.sources` and one-line `.list` files."""
    uris: list[str] = []
    for name, text in sources.items():
        uris.extend(_uris_from_deb822(text) if name.endswith(".sources") else _uris_from_one_line(text))
    return uris


def choose(uris: list[str]) -> Mirrors:
    archive = next((u for u in uris if u.rstrip("/").endswith("/debian")), FALLBACK_ARCHIVE).rstrip("/")
    security = next((u for u in uris if u.rstrip("/").endswith("/debian-security")), archive + "-security")
    return Mirrors(archive=archive, security=security.rstrip("/"))


def read_host_sources(root: Path = Path("/")) -> dict[str, str]:
    apt = root / "etc/apt"
    files = [apt / "sources.list"] + sorted((apt / "sources.list.d").glob("*"))
    return {f.name: f.read_text(errors="replace") for f in files if f.is_file() and f.suffix in (".list", ".sources")}


def host_mirrors() -> Mirrors:
    return choose(parse_uris(read_host_sources()))
