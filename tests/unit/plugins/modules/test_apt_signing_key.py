"""gpufleet.node.apt_signing_key: the fingerprints are checked before the keyring is written, a keyring that holds the
expected keys is kept without a download, and only https:// and file:// URLs are fetched.

Keys: the lab package mirror's public key and a throwaway binary keyring of two keys (module_utils/files/README.md).
"""
from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp
from ansible_collections.gpufleet.node.plugins.modules import apt_signing_key

from module_runner import run_module

UNIT = Path(__file__).resolve().parents[1]
KEY = (UNIT / "filter" / "files" / "deb822-key.asc").read_text()
FPR = "1649 D3D8 AB5A BE3A 5805  84CE A531 F2DE 5D17 3542"
KEYRING = (UNIT / "module_utils" / "files" / "two-keys-with-subkeys.gpg").read_bytes()
KEYRING_FPRS = ["BE3D3838B5A20325ABA81E1F3A3D919DE07D36C0", "7B37BCE5BB9A74040CEC42A9A1F6D508B9500BB0"]
URL = "https://keys.example.invalid/gpgkey"


class Server:
    """Answers fetch_url with ``body`` and counts the requests."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.body, self.status, self.urls = body, status, []

    def __call__(self, module, url, **kwargs):
        self.urls.append(url)
        if self.status != 200:
            return None, {"status": self.status, "msg": "HTTP Error %d: Not Found" % self.status}
        return io.BytesIO(self.body), {"status": 200, "msg": "OK"}


def run(args: dict, server: Server | None = None, check_mode: bool = False, diff: bool = False) -> dict:
    def no_download(module, url, **kwargs):
        raise AssertionError("no download expected, got " + url)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(apt_signing_key, "fetch_url", server or no_download)
        return run_module(apt_signing_key.main, dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff))


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_given_key_is_written_once_its_fingerprint_matched(tmp_path: Path):
    keyring = tmp_path / "mirror.asc"
    result = run({"path": str(keyring), "content": KEY, "fingerprints": [FPR]})
    assert result["changed"] is True and result["fetched"] is False
    assert result["primary_keys"] == [{"fingerprint": FPR.replace(" ", ""),
                                       "user_ids": ["gpufleet test lab package mirror (THROWAWAY TEST KEY) <lab@example.invalid>"]}]
    assert keyring.read_text() == KEY and mode_of(keyring) == 0o644
    assert run({"path": str(keyring), "content": KEY, "fingerprints": [FPR]})["changed"] is False


def test_a_wrong_fingerprint_fails_naming_the_variable_both_fingerprints_and_writes_nothing(tmp_path: Path):
    keyring = tmp_path / "mirror.asc"
    wrong = "C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"
    result = run({"path": str(keyring), "content": KEY, "fingerprints": [wrong],
                  "fingerprints_from": "containerd_nvidia_repo_key_fingerprint",
                  "key_from": "containerd_nvidia_repo_key_content"})
    assert result["failed"] is True
    assert result["msg"].startswith("containerd_nvidia_repo_key_fingerprint is '%s': the key from"
                                    " containerd_nvidia_repo_key_content holds 1649D3D8AB5ABE3A580584CEA531F2DE5D173542"
                                    " (gpufleet test lab package mirror" % wrong)
    assert "not C95B321B61E88C1809C4F759DDCAE044F796ECB0. Nothing was written to %s." % keyring in result["msg"]
    assert result["expected"] == ["C95B321B61E88C1809C4F759DDCAE044F796ECB0"]
    assert result["actual"] == [FPR.replace(" ", "")]
    assert not keyring.exists() and os.listdir(tmp_path) == []


def test_a_wrong_key_never_replaces_the_keyring_in_place(tmp_path: Path):
    keyring = tmp_path / "mirror.asc"
    keyring.write_text(KEY)
    result = run({"path": str(keyring), "content": _openpgp.armor(KEYRING), "fingerprints": [FPR]})
    assert result["failed"] is True and "holds BE3D3838" in result["msg"]
    assert keyring.read_text() == KEY


def test_a_url_key_is_downloaded_once_then_kept_without_a_download(tmp_path: Path):
    keyring = tmp_path / "toolkit.asc"
    server = Server(KEY.encode())
    first = run({"path": str(keyring), "url": URL, "fingerprints": [FPR]}, server)
    assert (first["changed"], first["fetched"], server.urls) == (True, True, [URL])
    assert keyring.read_text() == KEY
    second = run({"path": str(keyring), "url": URL, "fingerprints": [FPR]})
    assert (second["changed"], second["fetched"]) == (False, False)
    assert second["primary_keys"] == first["primary_keys"]


def test_a_keyring_holding_another_key_is_fetched_again_and_checked(tmp_path: Path):
    keyring = tmp_path / "toolkit.asc"
    keyring.write_text(_openpgp.armor(KEYRING))
    server = Server(KEY.encode())
    result = run({"path": str(keyring), "url": URL, "fingerprints": [FPR]}, server)
    assert (result["changed"], result["fetched"], server.urls) == (True, True, [URL])
    assert keyring.read_text() == KEY


def test_the_mode_of_a_keyring_in_place_is_set_without_a_download(tmp_path: Path):
    keyring = tmp_path / "toolkit.asc"
    keyring.write_text(KEY)
    keyring.chmod(0o600)
    result = run({"path": str(keyring), "url": URL, "fingerprints": [FPR]})
    assert (result["changed"], result["fetched"], mode_of(keyring)) == (True, False, 0o644)


@pytest.mark.parametrize("url", ["http://keys.example.invalid/gpgkey", "ftp://keys.example.invalid/gpgkey",
                                 "file:/srv/gpgkey", "/srv/gpgkey"])
def test_only_https_and_file_urls_are_fetched(tmp_path: Path, url: str):
    keyring = tmp_path / "toolkit.asc"
    result = run({"path": str(keyring), "url": url, "fingerprints": [FPR], "key_from": "container_toolkit_repo_key_url"})
    assert result["failed"] is True
    assert result["msg"].startswith("container_toolkit_repo_key_url is '%s': expected an https:// or file:// URL" % url)
    assert not keyring.exists()


@pytest.mark.parametrize("fingerprints", [[], [""], ["3BF863CC"]])
def test_a_missing_or_malformed_fingerprint_fails_before_anything_is_read(tmp_path: Path, fingerprints: list):
    result = run({"path": str(tmp_path / "k.asc"), "url": URL, "fingerprints": fingerprints,
                  "fingerprints_from": "nvidia_driver_mirror_signing_key_fingerprint"})
    assert result["failed"] is True
    assert result["msg"].startswith("nvidia_driver_mirror_signing_key_fingerprint is '")
    assert "expected 40 hex characters (spaces allowed)" in result["msg"]


def test_a_file_url_is_read_on_the_host_and_a_binary_key_is_armored_for_an_asc_keyring(tmp_path: Path):
    source = tmp_path / "keys.gpg"
    source.write_bytes(KEYRING)
    keyring = tmp_path / "site.asc"
    result = run({"path": str(keyring), "url": source.as_uri(), "fingerprints": list(reversed(KEYRING_FPRS))})
    assert (result["changed"], result["fetched"]) == (True, True)
    assert _openpgp.is_armored(keyring.read_bytes()) and _openpgp.dearmor(keyring.read_text()) == KEYRING


def test_an_armored_key_is_dearmored_for_a_gpg_keyring(tmp_path: Path):
    keyring = tmp_path / "cuda.gpg"
    run({"path": str(keyring), "url": URL, "fingerprints": KEYRING_FPRS}, Server(_openpgp.armor(KEYRING).encode()))
    assert keyring.read_bytes() == KEYRING
    assert run({"path": str(keyring), "url": URL, "fingerprints": KEYRING_FPRS})["changed"] is False


def test_a_file_of_two_keys_needs_both_fingerprints(tmp_path: Path):
    result = run({"path": str(tmp_path / "k.gpg"), "content": _openpgp.armor(KEYRING), "fingerprints": KEYRING_FPRS[:1]})
    assert result["failed"] is True and "holds BE3D3838" in result["msg"] and "7B37BCE5" in result["msg"]


def test_a_download_that_fails_names_the_url_and_writes_nothing(tmp_path: Path):
    result = run({"path": str(tmp_path / "k.asc"), "url": URL, "fingerprints": [FPR]}, Server(b"", status=404))
    assert result["failed"] is True
    assert result["msg"] == ("Cannot fetch the key from %s: HTTP Error 404: Not Found (HTTP status 404). Nothing was"
                             " written." % URL)
    assert os.listdir(tmp_path) == []


def test_what_is_not_a_key_fails_with_the_reason(tmp_path: Path):
    result = run({"path": str(tmp_path / "k.asc"), "url": URL, "fingerprints": [FPR]}, Server(b"<html>moved</html>"))
    assert result["failed"] is True
    assert result["msg"].startswith("The key from %s (the key) is not an OpenPGP public key this module reads:" % URL)


def test_a_new_content_with_the_same_fingerprint_replaces_the_keyring(tmp_path: Path):
    keyring = tmp_path / "mirror.asc"
    keyring.write_text(KEY)
    reworded = "\n".join(line for line in KEY.splitlines() if not line.startswith("=")) + "\n"
    result = run({"path": str(keyring), "content": reworded, "fingerprints": [FPR]})
    assert result["changed"] is True and keyring.read_text() == reworded


def test_check_mode_checks_the_key_and_writes_nothing(tmp_path: Path):
    keyring = tmp_path / "toolkit.asc"
    server = Server(KEY.encode())
    result = run({"path": str(keyring), "url": URL, "fingerprints": [FPR]}, server, check_mode=True)
    assert (result["changed"], server.urls) == (True, [URL]) and not keyring.exists()
    failed = run({"path": str(keyring), "url": URL, "fingerprints": KEYRING_FPRS}, Server(KEY.encode()), check_mode=True)
    assert failed["failed"] is True


def test_diff_shows_the_keys_before_and_after(tmp_path: Path):
    keyring = tmp_path / "mirror.asc"
    keyring.write_bytes(_openpgp.armor(KEYRING).encode())
    result = run({"path": str(keyring), "content": KEY, "fingerprints": [FPR]}, diff=True)
    diff = result["diff"]
    assert diff["before_header"] == diff["after_header"] == str(keyring)
    assert diff["before"].startswith("BE3D3838B5A20325ABA81E1F3A3D919DE07D36C0 gpufleet unit tests RSA")
    assert diff["after"].startswith("1649D3D8AB5ABE3A580584CEA531F2DE5D173542 gpufleet test lab package mirror")
    assert "sha256 " in diff["after"]
