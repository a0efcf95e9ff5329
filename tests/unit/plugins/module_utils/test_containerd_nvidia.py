"""containerd_nvidia's decision (module_utils/_containerd_nvidia.py): what preflight.yml's read found in place, and so
whether configure.yml has anything to do and whether verify.yml may judge that read."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.runtime_layer import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils._containerd_nvidia import host_found

CONFIG = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "nvidia"\n'
CHECKER = "#!/usr/bin/python3\n"
DROPIN = "[Service]\nKillMode=process\n"
WANTED = {"package": "containerd", "version": "1.7.24~ds1-1", "os_packages": ["python3-toml"], "config": CONFIG,
          "checker": CHECKER, "dropin": DROPIN, "killmode_dropin": True, "require_runtime_binary": True}


def _file(content: str | None, mode: str = "0644") -> dict:
    if content is None:
        return {"exists": False}
    return {"exists": True, "content": content, "mode": mode, "owner": "root", "group": "root"}


def _dir(mode: str = "0755") -> dict:
    return {"exists": True, "type": "directory", "mode": mode, "owner": "root", "group": "root"}


def _read(packages: dict | None = None, files: dict | None = None, stats: dict | None = None, service: str = "") -> dict:
    installed = {"status": "installed", "want": "hold"}
    return {
        "packages": {"containerd": {**installed, "version": "1.7.24~ds1-1"}, "python3-toml": {**installed, "version": "0.10.2-1"},
                     **(packages or {})},
        "files": {"config": _file(CONFIG), "checker": _file(CHECKER), "dropin": _file(DROPIN), **(files or {})},
        "stats": {"runtime_binary": {"exists": True}, "checker_dir": _dir(), "dropin_dir": _dir(), "config_dir": _dir(),
                  **(stats or {})},
        "commands": {"services": {"stdout": service or "Id=containerd.service\nUnitFileState=enabled\nActiveState=active\n"}},
    }


def test_a_configured_host_leaves_nothing_to_do() -> None:
    found = host_found(_read(), WANTED)
    assert found["configured"] and found["live_unchanged"] and found["installed"]
    assert found["dirs_in_place"] == ["checker_dir", "dropin_dir", "config_dir"]


@pytest.mark.parametrize(("read", "wanted", "not_in_place"), [
    (_read(files={"config": _file(CONFIG + "# edited\n")}), {}, "config_in_place"),
    (_read(files={"config": _file(CONFIG, "0600")}), {}, "config_in_place"),
    (_read(files={"checker": _file(None)}), {}, "files_in_place"),
    (_read(files={"dropin": _file(None)}), {}, "files_in_place"),
    (_read(stats={"config_dir": _dir("0700")}), {}, "files_in_place"),
    (_read(service="Id=containerd.service\nUnitFileState=disabled\nActiveState=active\n"), {}, "service_in_place"),
    (_read(service="Id=containerd.service\nUnitFileState=enabled\nActiveState=failed\n"), {}, "service_in_place"),
    # An installation to come could replace the configuration and restart the service.
    (_read(packages={"containerd": {"status": "installed", "want": "hold", "version": "1.7.20~ds1-1"}}), {}, "config_in_place"),
    (_read(packages={"containerd": {"status": "half-configured", "want": "install", "version": "1.7.24~ds1-1"}}), {},
     "service_in_place"),
])
def test_what_is_not_in_place_leaves_configure_something_to_do(read: dict, wanted: dict, not_in_place: str) -> None:
    found = host_found(read, {**WANTED, **wanted})
    assert found[not_in_place] is False
    assert found["configured"] is False and found["live_unchanged"] is False


def test_a_missing_drop_in_is_in_place_when_none_is_wanted() -> None:
    found = host_found(_read(files={"dropin": _file(None)}, stats={"dropin_dir": {"exists": False}}),
                       {**WANTED, "killmode_dropin": False})
    assert found["files_in_place"] and found["configured"]


def test_a_missing_runtime_binary_leaves_configure_to_say_so_unless_not_required() -> None:
    read = _read(stats={"runtime_binary": {"exists": False}})
    assert host_found(read, WANTED)["configured"] is False
    assert host_found(read, {**WANTED, "require_runtime_binary": False})["configured"] is True


def test_the_checker_needs_its_packages_for_the_read_to_stand_for_the_live_state() -> None:
    found = host_found(_read(packages={"python3-toml": {"status": "not-installed", "want": "unknown", "version": ""}}), WANTED)
    assert found["configured"] is True and found["live_unchanged"] is False


def test_an_empty_read_finds_nothing_in_place() -> None:
    found = host_found({}, WANTED)
    assert not any(found[key] for key in ("installed", "files_in_place", "config_in_place", "service_in_place", "configured"))


def test_the_filter() -> None:
    assert FilterModule().filters()["containerd_nvidia_found"] is host_found
