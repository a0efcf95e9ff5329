"""The lab's signed repositories: the fingerprint of the key a repository was signed with, as gpg reads it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpufleet_lab import apt_repo
from gpufleet_lab.proc import LabError

UNIT_FILES = Path(__file__).resolve().parents[2] / "tests" / "unit" / "plugins"
# `gpg --show-keys --with-colons` of a keyring of two keys with subkeys (tests/unit/plugins/module_utils/files).
TWO_KEYS = (UNIT_FILES / "module_utils" / "files" / "two-keys-with-subkeys.show-keys.txt").read_text()


def test_primary_fingerprints_skip_subkeys():
    assert apt_repo.primary_fingerprints(TWO_KEYS) == ["BE3D3838B5A20325ABA81E1F3A3D919DE07D36C0",
                                                       "7B37BCE5BB9A74040CEC42A9A1F6D508B9500BB0"]


def test_a_fingerprint_file_in_place_is_read_not_made_again(tmp_path: Path, monkeypatch):
    key = tmp_path / "gpgkey"
    key.write_text("not read")
    apt_repo.fingerprint_file(key).write_text("1649D3D8AB5ABE3A580584CEA531F2DE5D173542\n")
    monkeypatch.setattr(apt_repo, "gpg", lambda *args: pytest.fail("gpg ran"))
    assert apt_repo.write_fingerprint(key) == "1649D3D8AB5ABE3A580584CEA531F2DE5D173542"


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")
def test_a_missing_fingerprint_file_is_written_from_gpgs_reading(tmp_path: Path):
    key = tmp_path / "gpgkey"
    shutil.copy(UNIT_FILES / "filter" / "files" / "deb822-key.asc", key)
    assert apt_repo.write_fingerprint(key) == "1649D3D8AB5ABE3A580584CEA531F2DE5D173542"
    assert (tmp_path / "gpgkey.fingerprint").read_text() == "1649D3D8AB5ABE3A580584CEA531F2DE5D173542\n"


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")
def test_a_key_file_of_two_keys_is_refused(tmp_path: Path):
    key = tmp_path / "gpgkey"
    shutil.copy(UNIT_FILES / "module_utils" / "files" / "two-keys-with-subkeys.gpg", key)
    with pytest.raises(LabError, match="holds 2 primary keys"):
        apt_repo.write_fingerprint(key)
    assert not apt_repo.fingerprint_file(key).exists()
