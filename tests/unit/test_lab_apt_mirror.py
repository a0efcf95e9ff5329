"""The lab reuses the Debian archive this machine's apt already uses."""
from __future__ import annotations

import pytest

from gpufleet_lab import apt_mirror, images

DEB822 = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""
ONE_LINE = """# comment
deb [signed-by=/usr/share/keyrings/x.gpg] http://old.example/debian/ bookworm main
deb-src http://old.example/debian bookworm main
"""


def test_deb822_and_one_line_sources_are_both_read() -> None:
    uris = apt_mirror.parse_uris({"debian.sources": DEB822, "sources.list": ONE_LINE})
    assert uris == ["http://mirror.example/debian", "http://mirror.example/debian-security", "http://old.example/debian/"]


@pytest.mark.parametrize(
    ("uris", "archive", "security"),
    [
        (["http://mirror.example/debian", "http://mirror.example/debian-security"],
         "http://mirror.example/debian", "http://mirror.example/debian-security"),
        (["https://third.party/apt", "http://old.example/debian/"], "http://old.example/debian", "http://old.example/debian-security"),
        ([], apt_mirror.FALLBACK_ARCHIVE, apt_mirror.FALLBACK_ARCHIVE + "-security"),
    ],
)
def test_choose_mirrors(uris: list[str], archive: str, security: str) -> None:
    assert apt_mirror.choose(uris) == apt_mirror.Mirrors(archive=archive, security=security)


def test_image_sources_are_main_only_with_security_for_stable_releases() -> None:
    mirrors = apt_mirror.Mirrors(archive="http://m/debian", security="http://m/debian-security")
    bookworm = images.sources_file("bookworm", mirrors)
    assert "Suites: bookworm bookworm-updates\n" in bookworm
    assert "Suites: bookworm-security\n" in bookworm
    assert bookworm.count("Components: main\n") == 2
    sid = images.sources_file("sid", mirrors)
    assert "Suites: sid\n" in sid and "security" not in sid


def test_image_key_changes_with_the_sources() -> None:
    one = images.ImageSpec("bookworm", apt_mirror.Mirrors("http://a/debian", "http://a/debian-security"))
    two = images.ImageSpec("bookworm", apt_mirror.Mirrors("http://b/debian", "http://b/debian-security"))
    assert one.key != two.key
    assert one.tag == two.tag == "gpufleet-lab/node:bookworm"
