"""containerd_nvidia's decisions (module_utils/_containerd_nvidia.py): containerd's configuration the role writes, in the
drop-in layout or whole, and what preflight.yml's read found in place, and so whether configure.yml has anything to do
and whether verify.yml may judge that read."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.filter.runtime_layer import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils._containerd_nvidia import (
    WHOLE_FILE_MARK, config_document, config_files, host_found, upstream_version,
)

ROLE_VARS = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles/containerd_nvidia/vars/main.yml").read_text())

SETTINGS = {"version": "1.7.24~ds1-1", "mode": "default", "runtime_name": "nvidia",
            "runtime_binary": "/usr/bin/nvidia-container-runtime", "privileged_without_host_devices": False,
            "cdi_enabled": False, "runc_options": {"SystemdCgroup": True}, "sandbox_image": "", "registry_config_path": "",
            "cri_settings": {}, "extra_runtimes": {}, "config_extra": {}}
CONFIG_WANTED = {"layout": "whole", "settings": SETTINGS, "version": "1.7.24~ds1-1", "config_version": 2,
                 "config_path": "/etc/containerd/config.toml", "dropin_path": "/etc/containerd/conf.d/99-nvidia.toml",
                 "comments": ["Managed by Ansible", "written by the gpufleet.node.containerd_nvidia role."]}
CONFIG = config_files("", CONFIG_WANTED)["config"]
CHECKER = "#!/usr/bin/python3\n"
DROPIN = "[Service]\nKillMode=process\n"
WANTED = {**CONFIG_WANTED, "package": "containerd", "os_packages": ["python3-toml"], "checker": CHECKER, "dropin": DROPIN,
          "killmode_dropin": True, "require_runtime_binary": True}
# Debian's own /etc/containerd/config.toml (containerd 1.6.20~ds1-1+deb12u3 and 2.1.9~ds1-5 ship the same).
DEBIAN = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
V1_CRI = "io.containerd.grpc.v1.cri"
V3_RUNTIME, V3_IMAGES = "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"


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
        "files": {"config": _file(CONFIG), "checker": _file(CHECKER), "dropin": _file(DROPIN),
                  "runtime_dropin": _file(None), **(files or {})},
        "stats": {"runtime_binary": {"exists": True}, "checker_dir": _dir(), "dropin_dir": _dir(), "config_dir": _dir(),
                  "config_dropin_dir": _dir(), **(stats or {})},
        "commands": {"services": {"stdout": service or "Id=containerd.service\nUnitFileState=enabled\nActiveState=active\n"}},
    }


def test_a_configured_host_leaves_nothing_to_do() -> None:
    found = host_found(_read(), WANTED)
    assert found["configured"] and found["live_unchanged"] and found["installed"]
    assert found["dirs_in_place"] == ["checker_dir", "dropin_dir", "config_dir", "config_dropin_dir"]
    assert found["config"] == CONFIG and found["dropin"] == "" and not found["dropin_stale"]


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


def _settings(**changes) -> dict:
    return {**SETTINGS, **changes}


def _dropin_wanted(version: str = "1.6.20~ds1-1+deb12u3", **settings) -> dict:
    major = upstream_version(version)[0]
    return {**CONFIG_WANTED, "layout": "drop-in", "version": version, "config_version": 3 if major >= 2 else 2,
            "settings": _settings(version=version, **settings)}


@pytest.mark.parametrize(("version", "expected"), [
    ("1.6.20~ds1-1+deb12u3", (1, 6)), ("2.1.9~ds1-5", (2, 1)), ("1:2.0.0-1", (2, 0)), ("", (0, 0)),
])
def test_upstream_version(version: str, expected: tuple) -> None:
    assert upstream_version(version) == expected


def test_the_document_of_config_version_2_keeps_everything_under_the_cri_plugin() -> None:
    document = config_document(_settings(sandbox_image="pause:3.9", registry_config_path="/etc/containerd/certs.d",
                                         cri_settings={"restrict_oom_score_adj": True}), 2)
    cri = document["plugins"][V1_CRI]
    assert document["version"] == 2 and list(document["plugins"]) == [V1_CRI]
    assert cri["sandbox_image"] == "pause:3.9" and cri["registry"] == {"config_path": "/etc/containerd/certs.d"}
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2", "privileged_without_host_devices": False,
        "options": {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert cri["containerd"]["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}


def test_the_document_of_config_version_3_splits_runtimes_and_images() -> None:
    document = config_document(_settings(version="2.1.9~ds1-5", mode="runtimeclass", sandbox_image="pause:3.10",
                                         registry_config_path="/etc/containerd/certs.d"), 3)
    assert document["plugins"][V3_IMAGES] == {"pinned_images": {"sandbox": "pause:3.10"},
                                              "registry": {"config_path": "/etc/containerd/certs.d"}}
    assert document["plugins"][V3_RUNTIME]["containerd"]["default_runtime_name"] == "runc"


@pytest.mark.parametrize(("version", "annotations", "enable_cdi"), [
    # containerd 1.6 hands the plugin's CDI annotations to the runtime; 1.7 and later inject CDI devices themselves.
    ("1.6.20~ds1-1+deb12u3", ["cdi.k8s.io/*"], None),
    ("1.7.24~ds1-1", None, True),
    ("2.1.9~ds1-5", None, True),
])
def test_cdi_goes_where_this_containerd_injects_it(version: str, annotations: list | None, enable_cdi: bool | None) -> None:
    config_version = 3 if version.startswith("2") else 2
    cri = config_document(_settings(version=version, cdi_enabled=True), config_version)["plugins"][
        V3_RUNTIME if config_version == 3 else V1_CRI]
    assert cri["containerd"]["runtimes"]["nvidia"].get("container_annotations") == annotations
    assert cri.get("enable_cdi") is enable_cdi


def test_no_extra_setting_replaces_the_runtimes() -> None:
    document = config_document(_settings(
        extra_runtimes={"kata": {"runtime_type": "io.containerd.kata.v2"}},
        config_extra={"plugins": {V1_CRI: {"containerd": {"default_runtime_name": "kata"}}}, "oom_score": -999}), 2)
    containerd = document["plugins"][V1_CRI]["containerd"]
    assert containerd["default_runtime_name"] == "nvidia" and document["oom_score"] == -999
    assert sorted(containerd["runtimes"]) == ["kata", "nvidia", "runc"]


def test_the_whole_layout_writes_config_toml_whole_and_no_drop_in() -> None:
    files = config_files(DEBIAN, CONFIG_WANTED)
    assert files["dropin"] == "" and files["problems"] == []
    assert files["config"].startswith("# Managed by Ansible\n")
    assert tomllib.loads(files["config"]) == config_document(SETTINGS, 2)


def test_the_drop_in_keeps_the_sites_config_toml_and_imports_the_drop_in_directory() -> None:
    files = config_files(DEBIAN, _dropin_wanted("2.1.9~ds1-5"))
    main = tomllib.loads(files["config"])
    assert main["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert main["plugins"][V1_CRI]["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d"}
    assert main["plugins"]["io.containerd.internal.v1.opt"] == {"path": "/var/lib/containerd/opt"}
    # containerd 2.x merges files of one version only: the drop-in takes config.toml's version 2, and containerd 2.1
    # merges the tables key by key, so nothing of config.toml is copied.
    dropin = tomllib.loads(files["dropin"])
    assert dropin == config_document(_settings(version="2.1.9~ds1-5"), 2)
    assert "gpufleet.node.containerd_nvidia keeps the nvidia runtime" in files["dropin"]


def test_before_containerd_2_1_the_drop_in_starts_from_config_tomls_plugin_tables() -> None:
    # containerd 1.x and 2.0 replace a plugin table of config.toml whole with an imported file's (containerd issue
    # 5837): without the copy, Debian's CNI directory would be gone.
    site = DEBIAN + '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n    runtime_type = "old"\n'
    dropin = tomllib.loads(config_files(site, _dropin_wanted("1.6.20~ds1-1+deb12u3"))["dropin"])
    cri = dropin["plugins"][V1_CRI]
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d"}
    assert cri["containerd"]["runtimes"]["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert "io.containerd.internal.v1.opt" not in dropin["plugins"]


def test_a_runtime_of_the_roles_name_leaves_config_toml() -> None:
    site = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\nruntime_type = "x"\n'
    main = tomllib.loads(config_files(site, _dropin_wanted())["config"])
    assert main["plugins"][V1_CRI]["containerd"]["runtimes"] == {}


def test_the_roles_whole_file_carries_the_mark_the_drop_in_layout_recognises() -> None:
    # The whole file's comments live in the role's vars: without the mark, a node moving to the drop-in layout would
    # keep the old whole file as the site's, its nvidia runtime dropped but everything else kept.
    assert any(WHOLE_FILE_MARK in line for line in ROLE_VARS["__containerd_nvidia_config_wanted"]["comments"])


@pytest.mark.parametrize("site", ["", "   \n", CONFIG])
def test_no_config_toml_or_the_roles_whole_file_becomes_one_that_only_imports(site: str) -> None:
    files = config_files(site, _dropin_wanted("2.1.9~ds1-5"))
    assert tomllib.loads(files["config"]) == {"version": 3, "imports": ["/etc/containerd/conf.d/*.toml"]}
    assert "imported below" in files["config"]
    assert tomllib.loads(files["dropin"])["version"] == 3


def test_a_config_toml_that_imports_the_drop_in_already_stays_as_it_is() -> None:
    site = '# the site\'s own\nversion = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\noom_score = -999\n'
    wanted = _dropin_wanted()
    files = config_files(site, wanted)
    assert files["config"] == site and files["problems"] == []
    assert config_files(files["config"], wanted) == files


@pytest.mark.parametrize(("site", "version", "problem"), [
    ("oom_score = 0\n", "1.6.20~ds1-1+deb12u3", "config version 1 file; containerd 1.6.20~ds1-1+deb12u3 imports drop-ins only into version 2"),
    ("version = 3\n", "1.7.24~ds1-1", "config version 3 file"),
    ("version = 1\n", "2.1.9~ds1-5", "imports drop-ins only into version 2 or 3"),
    ("version = [\n", "2.1.9~ds1-5", "/etc/containerd/config.toml is not valid TOML"),
    ('version = 2\nx = 2026-12-07T00:00:00Z\n', "1.6.20~ds1-1+deb12u3", "the role cannot write it back"),
])
def test_a_config_toml_that_cannot_import_the_drop_in_is_refused(site: str, version: str, problem: str) -> None:
    problems = config_files(site, _dropin_wanted(version))["problems"]
    assert len(problems) == 1 and problem in problems[0]
    assert "containerd_nvidia_config_layout" in problems[0] or "by hand" in problems[0]


def test_the_drop_in_layout_in_place_leaves_nothing_to_do() -> None:
    wanted = {**WANTED, **_dropin_wanted("1.7.24~ds1-1")}
    files = config_files(DEBIAN, wanted)
    read = _read(files={"config": _file(files["config"], "0600"), "runtime_dropin": _file(files["dropin"])})
    found = host_found(read, wanted)
    assert found["configured"] and found["config"] == files["config"] and found["dropin"] == files["dropin"]
    # The site's file as it is, its mode included; the drop-in is the role's.
    assert not host_found(_read(files={"config": _file(DEBIAN)}), wanted)["config_in_place"]
    assert not host_found(_read(files={"config": _file(files["config"]), "runtime_dropin": _file(files["dropin"], "0600")}),
                          wanted)["config_in_place"]
    assert not host_found({**read, "stats": {**read["stats"], "config_dropin_dir": {"exists": False}}}, wanted)["configured"]


def test_the_whole_layout_removes_the_drop_in_it_wrote_and_no_other() -> None:
    ours = config_files(DEBIAN, _dropin_wanted("1.7.24~ds1-1"))["dropin"]
    found = host_found(_read(files={"runtime_dropin": _file(ours)}), WANTED)
    assert found["dropin_stale"] and not found["config_in_place"]
    found = host_found(_read(files={"runtime_dropin": _file("# NVIDIA's writer\nversion = 2\n")}), WANTED)
    assert not found["dropin_stale"] and found["configured"]


def test_a_refused_config_toml_is_never_in_place() -> None:
    wanted = {**WANTED, **_dropin_wanted("1.7.24~ds1-1")}
    found = host_found(_read(files={"config": _file("version = 1\n")}), wanted)
    assert found["config_problems"] and not found["config_in_place"]


def test_the_filter() -> None:
    assert FilterModule().filters()["containerd_nvidia_found"] is host_found
