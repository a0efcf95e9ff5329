"""The lab reuses the Debian archive this machine's apt already uses."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet_lab import apt_mirror, images

ONE_LINE = """# comment
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://old.example/debian/ bookworm main contrib
deb-src http://old.example/debian bookworm main
"""


def test_deb822_sources_keep_only_deb_entries(host_deb822_sources: str) -> None:
    sources = apt_mirror.parse_deb822_sources(host_deb822_sources)
    assert [s.uri for s in sources] == ["http://mirror.example/debian", "http://mirror.example/debian-security"]
    assert sources[0].suites == ("bookworm", "bookworm-updates")
    assert sources[0].signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_disabled_deb822_entry_is_ignored() -> None:
    assert apt_mirror.parse_deb822_sources("Types: deb\nEnabled: no\nURIs: http://x/debian\nSuites: bookworm\n"
                                           "Components: main\n") == []


def test_one_line_sources_with_options() -> None:
    (source,) = apt_mirror.parse_one_line_sources(ONE_LINE)
    assert source == apt_mirror.AptSource("http://old.example/debian/", ("bookworm",), ("main", "contrib"),
                                          "/usr/share/keyrings/x.gpg")


def test_host_sources_read_both_formats_in_apt_order(tmp_path: Path, host_deb822_sources: str) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(ONE_LINE)
    (tmp_path / "sources.list.d" / "debian.sources").write_text(host_deb822_sources)
    (tmp_path / "sources.list.d" / "x.list.disabled").write_text("deb http://no/debian bookworm main\n")
    assert [s.uri for s in apt_mirror.host_apt_sources(tmp_path)] == [
        "http://old.example/debian/", "http://mirror.example/debian", "http://mirror.example/debian-security"]
    assert apt_mirror.host_mirrors(tmp_path) == apt_mirror.Mirrors("http://old.example/debian",
                                                                   "http://mirror.example/debian-security")


def test_host_without_sources_falls_back_to_the_debian_archive(tmp_path: Path) -> None:
    assert apt_mirror.host_mirrors(tmp_path).archive == apt_mirror.FALLBACK_ARCHIVE


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
