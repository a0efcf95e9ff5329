"""plugins/module_utils/_openpgp.py on real keys: the fingerprints it computes are the ones gpg prints.

Fixtures (files/README.md): the lab package mirror's public key (ASCII armor with a checksum line) and a binary
keyring of two throwaway keys with subkeys, each with gpg's own reading of it captured once. Where gpg is installed,
a key made in the test is compared with gpg's reading too.
"""
from __future__ import annotations

import base64
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp as pgp

FILES = Path(__file__).parent / "files"
LAB_KEY = (FILES.parents[1] / "filter" / "files" / "deb822-key.asc").read_text()
KEYRING = (FILES / "two-keys-with-subkeys.gpg").read_bytes()


def gpg_primary_keys(colons: str) -> list[tuple[str, str]]:
    """(fingerprint, first user id) of each primary key in `gpg --show-keys --with-colons` output."""
    keys, record = [], None
    for fields in (line.split(":") for line in colons.splitlines()):
        if fields[0] in ("pub", "sub"):
            record = fields[0]
        elif fields[0] == "fpr" and record == "pub":
            keys.append([fields[9], ""])
        elif fields[0] == "uid" and keys and not keys[-1][1]:
            keys[-1][1] = fields[9]
    return [tuple(key) for key in keys]


def gpg_subkey_fingerprints(colons: str) -> list[str]:
    lines = colons.splitlines()
    return [lines[i + 1].split(":")[9] for i, line in enumerate(lines) if line.startswith("sub:")]


def as_keys(expected: list[tuple[str, str]]) -> list[dict]:
    return [{"fingerprint": fingerprint, "user_ids": [uid]} for fingerprint, uid in expected]


def test_the_lab_mirror_key_reads_as_gpg_reads_it():
    expected = gpg_primary_keys((FILES / "lab-mirror-key.show-keys.txt").read_text())
    assert expected == [("1649D3D8AB5ABE3A580584CEA531F2DE5D173542",
                         "gpufleet test lab package mirror (THROWAWAY TEST KEY) <lab@example.invalid>")]
    assert pgp.public_keys(LAB_KEY) == as_keys(expected)


def test_a_binary_keyring_of_two_keys_reads_as_gpg_reads_it_and_subkeys_are_not_keys():
    colons = (FILES / "two-keys-with-subkeys.show-keys.txt").read_text()
    assert len(gpg_primary_keys(colons)) == 2 and len(gpg_subkey_fingerprints(colons)) == 2
    assert pgp.public_keys(KEYRING) == as_keys(gpg_primary_keys(colons))
    assert not set(gpg_subkey_fingerprints(colons)) & set(pgp.fingerprints(KEYRING))


def test_the_armor_checksum_line_is_checked():
    assert any(line.startswith("=") and len(line) == 5 for line in LAB_KEY.splitlines())
    damaged = "\n".join("=AAAA" if line.startswith("=") and len(line) == 5 else line for line in LAB_KEY.splitlines())
    with pytest.raises(pgp.OpenPGPError, match="checksum"):
        pgp.fingerprints(damaged)


def test_armor_without_checksum_line_and_with_armor_headers():
    lines = [line for line in LAB_KEY.splitlines() if not (line.startswith("=") and len(line) == 5)]
    lines[1:1] = ["Comment: a header gpg may write: with a colon", "Version: GnuPG v2"]
    assert pgp.fingerprints("\n".join(lines)) == ["1649D3D8AB5ABE3A580584CEA531F2DE5D173542"]


def test_armor_round_trip_with_checksum():
    armored = pgp.armor(KEYRING)
    assert armored.startswith(pgp.ARMOR_BEGIN + "\n\n") and armored.endswith(pgp.ARMOR_END + "\n")
    assert pgp.dearmor(armored) == KEYRING
    checksum = [line for line in armored.splitlines() if line.startswith("=")]
    assert checksum == ["=" + base64.b64encode(struct.pack(">I", pgp.crc24(KEYRING))[1:]).decode()]


def test_two_armored_blocks_in_one_file():
    both = LAB_KEY + "\n" + pgp.armor(KEYRING)
    assert pgp.fingerprints(both) == pgp.fingerprints(LAB_KEY) + pgp.fingerprints(KEYRING)


def test_the_crc24_of_rfc_4880():
    # RFC 4880's CRC-24 of "123456789" (its check value).
    assert pgp.crc24(b"123456789") == 0x21CF02


def packet(tag: int, body: bytes) -> bytes:
    """A new-format packet with a one-octet length."""
    return bytes([0xC0 | tag, len(body)]) + body


@pytest.mark.parametrize(("data", "expected"), [
    # old format: tag 13, one-, two- and four-octet lengths, and indeterminate (to the end)
    (bytes([0xB4, 3]) + b"abc", [(13, b"abc")]),
    (bytes([0xB5, 0, 3]) + b"abc", [(13, b"abc")]),
    (bytes([0xB6, 0, 0, 0, 3]) + b"abc", [(13, b"abc")]),
    (bytes([0xB7]) + b"abc", [(13, b"abc")]),
    # new format: one-octet, two-octet (192 + ...), five-octet lengths
    (packet(13, b"x" * 5), [(13, b"x" * 5)]),
    (bytes([0xCD, 192, 8]) + b"y" * 200, [(13, b"y" * 200)]),
    (bytes([0xCD, 255, 0, 0, 0, 2]) + b"zz", [(13, b"zz")]),
    # new format, partial body lengths: 2 octets (0xE1), then the last part of 1
    (bytes([0xCD, 0xE1]) + b"ab" + bytes([1]) + b"c", [(13, b"abc")]),
])
def test_packet_lengths(data: bytes, expected: list):
    assert list(pgp.packets(data)) == expected


@pytest.mark.parametrize(("data", "message"), [
    (b"not a key", "not an OpenPGP packet header"),
    (KEYRING[:100], "truncated"),
    (packet(5, b"\x04rest"), "secret key"),
    (packet(6, b"\x03rest"), "version 3"),
    (packet(6, b"\x06rest"), "version 6"),
    (packet(13, b"only a user id"), "no OpenPGP public key"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQ==\n", "no \"-----END"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "not base64"),
    ("-----BEGIN PGP SIGNATURE-----\n\nmQ==\n-----END PGP SIGNATURE-----\n", "no \"-----BEGIN PGP PUBLIC KEY BLOCK"),
])
def test_what_is_not_a_public_key_fails_with_the_reason(data, message: str):
    with pytest.raises(pgp.OpenPGPError, match=message):
        pgp.public_keys(data)


def test_user_ids_follow_their_key_and_signatures_are_skipped():
    body = b"\x04" + b"\x00" * 10
    data = packet(6, body) + packet(13, b"first <a@example.invalid>") + packet(2, b"sig") + packet(13, b"second")
    keys = pgp.public_keys(data)
    assert [key["user_ids"] for key in keys] == [["first <a@example.invalid>", "second"]]
    assert keys[0]["fingerprint"] == pgp.v4_fingerprint(body)


@pytest.mark.parametrize(("value", "expected"), [
    ("EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("eb693b3035cd5710e231e123a4b469963bf863cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    (" c95b321b61e88c1809c4f759ddcae044f796ecb0\n", "C95B321B61E88C1809C4F759DDCAE044F796ECB0"),
])
def test_normalize_fingerprint(value: str, expected: str):
    assert pgp.normalize_fingerprint(value) == expected


@pytest.mark.parametrize("value", ["", "3BF863CC", "A4B469963BF863CC", "0x" + "A" * 40, "G" * 40, "A" * 41, None])
def test_normalize_fingerprint_refuses_what_is_not_40_hex(value):
    with pytest.raises(pgp.OpenPGPError, match="40 hex characters"):
        pgp.normalize_fingerprint(value)


FPR = "C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"


@pytest.mark.parametrize(("url", "fingerprint", "required", "expected"), [
    ("https://nvidia.github.io/libnvidia-container/gpgkey", FPR, True, []),
    ("file:///srv/mirror/gpgkey", FPR.replace(" ", "").lower(), True, []),
    ("", FPR, True, []),
    ("", "", False, []),
    ("https://example.invalid/key", [FPR, FPR], True, []),
    ("http://nvidia.github.io/libnvidia-container/gpgkey", FPR, True,
     ["k_url is 'http://nvidia.github.io/libnvidia-container/gpgkey': expected an https:// or file:// URL"]),
    ("file:/srv/mirror/gpgkey", FPR, True, ["k_url is 'file:/srv/mirror/gpgkey': expected an https:// or file:// URL"]),
    ("/srv/mirror/gpgkey", FPR, True, ["k_url is '/srv/mirror/gpgkey': expected an https:// or file:// URL"]),
    ("https://example.invalid/key", "", True, ["k_fpr is '': expected 40 hex characters (spaces allowed)"]),
    ("https://example.invalid/key", "3BF863CC", False, ["k_fpr is '3BF863CC': expected 40 hex characters (spaces allowed)"]),
    ("https://example.invalid/key", [FPR, "nope"], True, ["k_fpr is 'nope': expected 40 hex characters"]),
    ("ftp://example.invalid/key", "", True, ["k_url is 'ftp://example.invalid/key'", "k_fpr is ''"]),
])
def test_key_source_problems(url: str, fingerprint, required: bool, expected: list[str]):
    problems = pgp.key_source_problems("k_url", url, "k_fpr", fingerprint, required=required)
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem


@pytest.mark.parametrize(("value", "expected"), [
    ("https://apt.example.internal/key.asc", "https://apt.example.internal/key.asc"),
    ("http://apt.example.internal/key.asc", "http://apt.example.internal/key.asc"),
    ("file:/srv/key.asc", "file:/srv/key.asc"),
    ("/usr/share/keyrings/site.gpg", ""),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n", ""),
    ("", ""),
    (None, ""),
])
def test_key_url_tells_a_url_from_a_path_or_an_inline_key(value, expected: str):
    assert pgp.key_url(value) == expected


def test_key_source_problems_name_the_fingerprint_format_and_where_to_read_it():
    (problem,) = pgp.key_source_problems("u", "", "container_toolkit_repo_key_fingerprint", "12 34")
    assert problem == ("container_toolkit_repo_key_fingerprint is '12 34': expected 40 hex characters (spaces allowed),"
                       " the fingerprint of the key's primary key (gpg --show-keys).")


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")
def test_a_key_gpg_makes_now_reads_as_gpg_reads_it(tmp_path: Path):
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))

    def gpg(*args: str) -> str:
        return subprocess.run(["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback",
                               "--passphrase", "", *args], env=env, check=True, capture_output=True).stdout.decode()

    try:
        gpg("--quick-gen-key", "gpufleet unit test (THROWAWAY) <unit@example.invalid>", "ed25519", "sign", "never")
        exported = gpg("--armor", "--export")
        (tmp_path / "key.asc").write_text(exported)
        expected = gpg_primary_keys(gpg("--show-keys", "--with-colons", str(tmp_path / "key.asc")))
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], env=env, check=False)
    assert pgp.public_keys(exported) == as_keys(expected)
    assert pgp.public_keys(pgp.dearmor(exported)) == as_keys(expected)
