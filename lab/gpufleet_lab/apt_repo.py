"""A signed apt repository from .deb files: the index, the Release file and its signatures.

Used by the lab's package mirror (package_mirror.py: Debian layout, ``dists/<suite>/<component>/``) and the
STAND-IN toolkit repository (tests/standins/build_toolkit_repo.py: NVIDIA's flat layout). Each is signed
with a throwaway key made for it; the roles receive its public key as their repository key, and its fingerprint
as gpg reads it (``gpgkey.fingerprint`` beside the key) as the key's expected fingerprint, as they would a real
mirror's.
"""
from __future__ import annotations

import email.utils
import gzip
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from gpufleet_lab.proc import LabError, run

KEY_UID_FORMAT = "gpufleet test lab {what} (THROWAWAY TEST KEY) <lab@example.invalid>"


def package_stanza(deb: Path, base: Path) -> str:
    """The Packages index stanza of one .deb, its Filename relative to ``base`` (the repository's root)."""
    control = run(["dpkg-deb", "--field", str(deb)], quiet=True).stdout
    data = deb.read_bytes()
    relative = deb.relative_to(base).as_posix()
    extra = [
        f"Filename: {'./' if base == deb.parent else ''}{relative}",
        f"Size: {len(data)}",
        f"MD5sum: {hashlib.md5(data).hexdigest()}",  # noqa: S324 - apt index format, not security
        f"SHA256: {hashlib.sha256(data).hexdigest()}",
    ]
    return control.rstrip("\n") + "\n" + "\n".join(extra) + "\n"


def write_packages(index_dir: Path, debs: Sequence[Path], base: Path) -> list[Path]:
    """Write Packages and Packages.gz of ``debs`` into ``index_dir``; return both paths."""
    index_dir.mkdir(parents=True, exist_ok=True)
    packages = index_dir / "Packages"
    packages.write_text("\n".join(package_stanza(deb, base) for deb in debs), encoding="utf-8")
    compressed = index_dir / "Packages.gz"
    compressed.write_bytes(gzip.compress(packages.read_bytes(), mtime=0))
    return [packages, compressed]


def release_text(release_dir: Path, index_files: Sequence[Path], fields: dict[str, str]) -> str:
    """The Release file over ``index_files`` (paths relative to ``release_dir``); no Valid-Until: it never expires."""
    lines = [f"{name}: {value}" for name, value in fields.items()]
    lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
    for title, algo in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        lines.append(f"{title}:")
        for path in index_files:
            data = path.read_bytes()
            lines.append(f" {algo(data).hexdigest()} {len(data):>8} {path.relative_to(release_dir).as_posix()}")
    return "\n".join(lines) + "\n"


def gpg(home: Path, *args: str) -> str:
    """Run gpg in batch mode in a private home directory."""
    return run(["gpg", "--homedir", str(home), "--batch", "--yes", "--no-tty", "--pinentry-mode", "loopback",
                "--passphrase", "", *args], quiet=True).stdout


@contextmanager
def gpg_home() -> Iterator[Path]:
    """A private gpg home directory, its agent stopped and the directory removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="gpufleet-gnupg-"))
    try:
        home.chmod(0o700)
        yield home
    finally:
        run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, quiet=True)
        shutil.rmtree(home, ignore_errors=True)


def sign(release_dir: Path, key_out: Path, key_uid: str, also: Sequence[Path] = ()) -> None:
    """Sign ``release_dir``/Release (and each of ``also``) with one fresh throwaway key: InRelease, Release.gpg,
    the public key and its fingerprint file."""
    with gpg_home() as home:
        gpg(home, "--quick-gen-key", key_uid, "rsa3072", "sign", "never")
        for directory in (release_dir, *also):
            release = directory / "Release"
            gpg(home, "--clearsign", "--digest-algo", "SHA256", "--output", str(directory / "InRelease"), str(release))
            gpg(home, "--armor", "--detach-sign", "--digest-algo", "SHA256", "--output", str(directory / "Release.gpg"),
                str(release))
        key_out.write_text(gpg(home, "--armor", "--export"))
    write_fingerprint(key_out)


def primary_fingerprints(colons: str) -> list[str]:
    """The primary keys' fingerprints in ``gpg --with-colons`` output (the ``fpr`` record after each ``pub``)."""
    found, record = [], ""
    for fields in (line.split(":") for line in colons.splitlines()):
        if fields[0] in ("pub", "sub", "sec", "ssb"):
            record = fields[0]
        elif fields[0] == "fpr" and record == "pub":
            found.append(fields[9])
    return found


def fingerprint_file(key: Path) -> Path:
    return key.with_name(key.name + ".fingerprint")


def write_fingerprint(key: Path) -> str:
    """The fingerprint of the one primary key of the public key file ``key`` as gpg reads it, kept in
    ``<key>.fingerprint`` (written when missing: a repository built before the file existed gets it too)."""
    target = fingerprint_file(key)
    if not target.is_file():
        with gpg_home() as home:
            found = primary_fingerprints(gpg(home, "--show-keys", "--with-colons", str(key)))
        if len(found) != 1:
            raise LabError(f"{key} holds {len(found)} primary keys; a lab repository is signed with one")
        staged = target.with_name(f"{target.name}.{os.getpid()}")
        staged.write_text(found[0] + "\n")
        staged.chmod(0o644)
        staged.replace(target)
    return target.read_text().strip()


def make_readable(root: Path) -> None:
    """Directories 0755, files 0644: apt's unprivileged _apt user reads a file: repository."""
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
