"""The boot-time self-check runs the collection's host check on the node from the module_utils files the
gpu_self_check role copies there: they must be every module_utils file the check imports, transitively."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1].parent
MODULE_UTILS = ROOT / "plugins" / "module_utils"
IMPORT = re.compile(r"^from ansible_collections\.gpufleet\.node\.plugins\.module_utils(?:\.(_\w+))? import \(?([^)\n]*)",
                    re.MULTILINE)


def _imported(name: str) -> set[str]:
    found = set()
    for module, names in IMPORT.findall((MODULE_UTILS / name).read_text()):
        if module:
            found.add(module + ".py")
        else:
            found.update(part.strip() + ".py" for part in names.split(",") if part.strip())
    return found


def test_the_self_check_ships_every_module_utils_file_its_check_imports() -> None:
    shipped = set(yaml.safe_load((ROOT / "roles/gpu_self_check/vars/main.yml").read_text())["__gpu_self_check_module_utils"])
    needed, todo = set(), ["_nvidia_health.py"]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(_imported(name))
    assert needed <= shipped, f"not copied to the node: {sorted(needed - shipped)}"
    assert "_cuda.py" in needed
