"""keyring_in_place: a keyring gpu_node_read read is in place when it holds exactly the expected keys."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.filter.keyring import FilterModule, keyring_in_place
from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp

FILES = Path(__file__).parent / "files"
KEY = (FILES / "deb822-key.asc").read_text()
FPR = "1649 D3D8 AB5A BE3A 5805  84CE A531 F2DE 5D17 3542"
OTHER = _openpgp.armor((FILES.parents[1] / "module_utils" / "files" / "two-keys-with-subkeys.gpg").read_bytes())


def entry(content: str = KEY, **changes) -> dict:
    return dict({"path": "/etc/apt/keyrings/k.asc", "exists": True, "content": content, "mode": "0644",
                 "owner": "root", "group": "root"}, **changes)


def test_registered():
    assert FilterModule().filters()["keyring_in_place"] is keyring_in_place


@pytest.mark.parametrize(("read", "fingerprints", "content", "expected"), [
    (entry(), [FPR], "", True),
    (entry(), [FPR.replace(" ", "").lower()], KEY, True),
    (entry(), [FPR], OTHER, False),
    (entry(OTHER), [FPR], "", False),
    (entry(), ["C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"], "", False),
    (entry(), [FPR, "C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"], "", False),
    (entry(), [""], "", False),
    (entry(), [], "", False),
    (entry(mode="0600"), [FPR], "", False),
    (entry(owner="nobody"), [FPR], "", False),
    (entry("", exists=False), [FPR], "", False),
    (entry("\ufffd\ufffd binary keyring read as text"), [FPR], "", False),
    (entry(error="Permission denied"), [FPR], "", False),
    ({}, [FPR], "", False),
    (None, [FPR], "", False),
])
def test_keyring_in_place(read, fingerprints: list, content: str, expected: bool):
    assert keyring_in_place(read, fingerprints, content) is expected
