"""The rules between each role's settings (module_utils/_settings.py) and the action that runs them with the role's
argument spec (plugins/action/validate_settings.py), on the roles' own defaults."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.action.validate_settings import validate
from ansible_collections.gpufleet.node.plugins.module_utils import _settings

REPO = Path(__file__).resolve().parents[4]
DEBIAN_12 = {'distribution': 'Debian', 'distribution_version': '12.8', 'distribution_major_version': '12',
             'architecture': 'x86_64'}
CONTEXT = {
    'nvidia_driver': {'supported_platforms': {'Debian': ['12', '13'], 'Ubuntu': ['22', '24']},
                      'supported_architectures': ['x86_64', 'aarch64']},
    'container_toolkit': {'platform_supported': True, 'cdi_dirs': ['/etc/cdi', '/var/run/cdi']},
    'containerd_nvidia': {'platform_supported': True},
    'gpu_node_join': {},
    'gpu_self_check': {},
    'mig_layout': {},
}
# What the defaults' templates give on a lab node.
TEMPLATED = {'gpu_node_join_node_name': 'gpu-1', 'gpu_self_check_node_name': 'gpu-1', 'container_toolkit_host_root': '/',
             'gpu_node_join_gpu_check_host_root': '/', 'gpu_node_join_gpu_check_nvidia_smi_path': '',
             'gpu_self_check_host_root': '/', 'gpu_self_check_nvidia_smi_path': '', 'nvidia_driver_check_host_root': '/',
             'nvidia_driver_check_nvidia_smi_path': '', 'nvidia_driver_cuda_versions': [],
             'nvidia_driver_cuda_forward_compat': False, 'mig_layout_configs': {}, 'mig_layout_config': '',
             'mig_layout_nvidia_smi_path': 'nvidia-smi'}


def defaults(role: str) -> dict:
    values = yaml.safe_load((REPO / 'roles' / role / 'defaults/main.yml').read_text()) or {}
    return {name: TEMPLATED.get(name, value) for name, value in values.items()}


def problems_of(role: str, **changes) -> list[str]:
    found = validate(role, dict(defaults(role), **changes), DEBIAN_12, CONTEXT[role])
    return found


def one_problem(role: str, **changes) -> str:
    found = problems_of(role, **changes)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize('role', sorted(CONTEXT))
def test_the_defaults_are_valid(role):
    assert problems_of(role) == []


def test_every_role_with_a_preflight_has_rules():
    assert set(_settings.RULES) == set(CONTEXT)


# --------------------------------------------------------------------------- the argument spec


def test_the_argument_spec_is_checked_first_and_names_the_role():
    found = problems_of('nvidia_driver', nvidia_driver_source='ppa', nvidia_driver_version='latest')
    assert found == ["nvidia_driver: value of nvidia_driver_source must be one of: distribution, cuda, mirror, got: ppa"]


def test_the_rules_see_the_converted_settings():
    # the argument spec turns the text "3" into the number the rule compares
    assert problems_of('gpu_node_join', gpu_node_join_time_slicing_replicas='3') == []


def test_a_named_configuration_may_serve_mig_devices():
    assert problems_of('gpu_node_join', gpu_node_join_device_plugin_named_configs=True, gpu_node_join_device_plugin_config='mig',
                       gpu_node_join_mig_strategy='mixed') == []


def test_a_named_configuration_may_time_slice():
    assert problems_of('gpu_node_join', gpu_node_join_device_plugin_named_configs=True, gpu_node_join_device_plugin_config='dev',
                       gpu_node_join_time_slicing_replicas=2, gpu_node_join_device_plugin_api_server='[fd00::1]:6443') == []


# --------------------------------------------------------------------------- nvidia_driver


@pytest.mark.parametrize('version, words', [
    ('535.261.3', ["nvidia_driver_version is '535.261.3'", 'expected an NVIDIA driver version such as 535.261.03']),
    ('535.261.03-1', ['belongs in nvidia_driver_package_version']),
    ('', ["nvidia_driver_version is ''"]),
    (550.90, ['nvidia_driver_version is 550.9, a number', '550.90 becomes 550.9', 'Quote it']),
    (550, ['nvidia_driver_version is 550, a number']),
])
def test_a_driver_version_is_a_quoted_driver_version(version, words):
    message = one_problem('nvidia_driver', nvidia_driver_version=version)
    assert all(word in message for word in words), message


def test_a_float_driver_version_is_refused_with_the_cuda_source():
    message = one_problem('nvidia_driver', nvidia_driver_version=550.90, nvidia_driver_source='cuda')
    assert message.startswith('nvidia_driver_version is 550.9, a number')


@pytest.mark.parametrize('url, ok', [
    ('https://developer.download.nvidia.com/compute/cuda/repos', True),
    ('file:///srv/cuda', True),
    ('http://developer.download.nvidia.com/compute/cuda/repos', False),
    ('ftp://mirror.example/cuda', False),
])
def test_the_cuda_url_is_https_or_file(url, ok):
    found = problems_of('nvidia_driver', nvidia_driver_source='cuda', nvidia_driver_cuda_url=url)
    assert found == ([] if ok else ["nvidia_driver_cuda_url is '%s': expected a URL starting with https:// or file://."
                                    % url])


FINGERPRINT = 'EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC'
MIRROR = {'nvidia_driver_source': 'mirror', 'nvidia_driver_mirror_url': 'http://mirror.example/debian',
          'nvidia_driver_mirror_suites': ['bookworm'], 'nvidia_driver_mirror_components': ['non-free'],
          'nvidia_driver_mirror_signing_key': 'https://mirror.example/key.asc',
          'nvidia_driver_mirror_signing_key_fingerprint': FINGERPRINT}


def test_a_mirror_may_be_served_over_http_since_apt_checks_its_signature():
    assert problems_of('nvidia_driver', **MIRROR) == []


@pytest.mark.parametrize('changes, message', [
    ({'nvidia_driver_mirror_signing_key': 'http://mirror.example/key.asc'},
     "nvidia_driver_mirror_signing_key is 'http://mirror.example/key.asc': expected an https:// or file:// URL"),
    ({'nvidia_driver_mirror_signing_key_fingerprint': ''}, "nvidia_driver_mirror_signing_key_fingerprint is '': expected"),
    ({'nvidia_driver_mirror_signing_key_fingerprint': '3BF863CC'}, "nvidia_driver_mirror_signing_key_fingerprint is '3BF863CC'"),
])
def test_a_mirror_key_is_fetched_over_tls_and_pinned(changes, message):
    assert one_problem('nvidia_driver', **{**MIRROR, **changes}).startswith(message)


def test_a_mirror_key_given_as_a_path_on_the_host_needs_only_its_fingerprint():
    assert problems_of('nvidia_driver', **{**MIRROR, 'nvidia_driver_mirror_signing_key': '/srv/mirror/key.asc'}) == []


def test_the_cuda_key_is_pinned_by_default():
    assert problems_of('nvidia_driver', nvidia_driver_source='cuda') == []
    found = problems_of('nvidia_driver', nvidia_driver_source='cuda', nvidia_driver_cuda_signing_key_fingerprint='')
    assert found == ["nvidia_driver_cuda_signing_key_fingerprint is '': expected " + found[0].split(': expected ', 1)[1]]


def test_an_incomplete_mirror_names_what_is_missing():
    found = problems_of('nvidia_driver', **{**MIRROR, 'nvidia_driver_mirror_suites': [], 'nvidia_driver_mirror_signing_key': ''})
    assert 'nvidia_driver_mirror_signing_key is empty' in found[0]
    assert 'nvidia_driver_mirror_suites is []' in found[0]


@pytest.mark.parametrize('changes, words', [
    ({'nvidia_driver_package_version': '535.216.03-2~bpo12+1'}, ['It must start with nvidia_driver_version']),
    ({'nvidia_driver_package_versions': {'nvidia-smi': 'newest'}}, ["nvidia_driver_package_versions has 'nvidia-smi: newest'"]),
    ({'nvidia_driver_extra_packages': ['nvidia-cuda-mps=535.261.03-1']}, ["nvidia_driver_extra_packages has 'nvidia-cuda-mps=535.261.03-1'"]),
    ({'nvidia_driver_modules_load': ['nvidia']}, ["nvidia_driver_modules_load is ['nvidia']", 'it must contain nvidia-uvm']),
    ({'nvidia_driver_dkms_signing_key': '/var/lib/dkms/mok.key'}, ["nvidia_driver_dkms_signing_key is '/var/lib/dkms/mok.key'", 'set both']),
    ({'nvidia_driver_expected_gpu_count': -1}, ['nvidia_driver_expected_gpu_count is -1: expected an integer of at least 0.']),
    ({'nvidia_driver_reboot_timeout': 0}, ['nvidia_driver_reboot_timeout is 0: expected an integer of at least 1.']),
])
def test_driver_rules(changes, words):
    message = one_problem('nvidia_driver', **changes)
    assert all(word in message for word in words), message


@pytest.mark.parametrize(('driver', 'cuda', 'ok'), [
    ('535.261.03', ['12.2'], True),                  # 535 ships with CUDA 12.2
    ('535.261.03', ['11.8', '12.2'], True),
    ('535.261.03', ['12.4'], False),
    ('550.54.14', ['12.4', '12.2'], True),           # exactly the minimum
    ('550.54.13', ['12.4'], False),
    ('580.65.06', ['13.0'], True),
    ('535.261.03', [], True),                        # no CUDA named: no gate
])
def test_the_driver_must_run_the_highest_cuda_of_the_fleet(driver, cuda, ok):
    found = problems_of('nvidia_driver', nvidia_driver_version=driver, nvidia_driver_cuda_versions=cuda)
    assert (found == []) is ok, found


def test_a_driver_too_old_for_the_fleets_cuda_names_both_versions_and_the_minimum():
    message = one_problem('nvidia_driver', nvidia_driver_version='535.261.03', nvidia_driver_cuda_versions=['12.2', '12.4'])
    for words in ('nvidia_driver_version is 535.261.03', 'runs CUDA up to 12.2', 'needs CUDA 12.4',
                  'needs driver 550.54.14 or later', 'branch 550', 'nvidia_driver_cuda_forward_compat=true'):
        assert words in message, (words, message)


def test_forward_compatibility_lets_an_older_driver_through_when_asked():
    assert problems_of('nvidia_driver', nvidia_driver_version='535.261.03', nvidia_driver_cuda_versions=['12.4'],
                       nvidia_driver_cuda_forward_compat=True) == []


@pytest.mark.parametrize(('cuda', 'words'), [
    ([12.4], 'a number'),
    (['12'], 'major.minor'),
    (['12.4.1'], 'major.minor'),
    (['14.0'], "not a CUDA release NVIDIA's table names"),
    (['12.7'], "not a CUDA release NVIDIA's table names"),   # drivers of branch 565 report it; no toolkit was released
])
def test_cuda_versions_are_releases_of_the_table_given_as_text(cuda, words):
    message = one_problem('nvidia_driver', nvidia_driver_cuda_versions=cuda)
    assert message.startswith('nvidia_driver_cuda_versions has') and words in message, message


def test_an_unsupported_platform_is_named():
    found = validate('nvidia_driver', defaults('nvidia_driver'),
                     dict(DEBIAN_12, distribution='CentOS', distribution_version='9', distribution_major_version='9',
                          architecture='ppc64le'), CONTEXT['nvidia_driver'])
    assert found == ['nvidia_driver: CentOS 9 is not supported. Supported: Debian 12, 13 and Ubuntu 22.04, 24.04.',
                     'nvidia_driver: architecture ppc64le is not supported. Supported: x86_64, aarch64.']


# --------------------------------------------------------------------------- container_toolkit


@pytest.mark.parametrize('changes, words', [
    ({'container_toolkit_version': '1.17.8'}, ["got '1.17.8'", "like '1.17.8-1'"]),
    ({'container_toolkit_repo_key_content': 'not a key'}, ['must be an ASCII-armored PGP public key block', "starting with 'not a key'"]),
    ({'container_toolkit_config': {'accept-nvidia-visible-devices-envvar-when-unprivileged': True}},
     ['must not set accept-nvidia-visible-devices-envvar-when-unprivileged']),
    ({'container_toolkit_config': {'nvidia-container-cli': {'root': None}}}, ['must not hold empty (null) values']),
    ({'container_toolkit_cdi_enabled': True, 'container_toolkit_cdi_spec_path': '/tmp/nvidia.yaml'}, ["got '/tmp/nvidia.yaml'"]),
    ({'container_toolkit_host_root': 'srv/host'}, ["container_toolkit_host_root must be an absolute path", "got 'srv/host'"]),
    ({'container_toolkit_repo_url': 'ftp://mirror.example.internal/toolkit'},
     ["container_toolkit_repo_url is 'ftp://mirror.example.internal/toolkit'", 'an http://, https:// or file:/ URL']),
    ({'container_toolkit_repo_key_url': 'file:///srv/key dir/gpgkey'},
     ["container_toolkit_repo_key_url is 'file:///srv/key dir/gpgkey'", 'https:// or file:// URL without spaces']),
])
def test_toolkit_rules(changes, words):
    message = one_problem('container_toolkit', **changes)
    assert all(word in message for word in words), message


def test_the_toolkit_names_an_unsupported_platform():
    found = validate('container_toolkit', defaults('container_toolkit'),
                     dict(DEBIAN_12, distribution='Fedora', distribution_version='41'),
                     {'platform_supported': False, 'cdi_dirs': ['/etc/cdi']})
    assert found == ['container_toolkit supports Debian and Ubuntu (apt family); this host runs Fedora 41.']


# --------------------------------------------------------------------------- containerd_nvidia


@pytest.mark.parametrize('version', ['1.6.20~ds1-1+deb12u3', '1.7.27-1', '2.1.9~ds1-1', '1:1.7.24-0ubuntu1~24.04.2'])
def test_exact_containerd_package_versions_pass(version):
    assert problems_of('containerd_nvidia', containerd_nvidia_version=version) == []


@pytest.mark.parametrize('version, words', [
    ('1.7.27', ["got '1.7.27'", 'The package revision is missing', 'such as 1.7.27-1']),
    ('3.0.0-1', ["got '3.0.0-1'"]),
    ('latest', ["got 'latest'"]),
])
def test_containerd_versions_without_revision_or_of_another_major_fail(version, words):
    message = one_problem('containerd_nvidia', containerd_nvidia_version=version)
    assert all(word in message for word in words), message
    assert (version == '1.7.27') == ('revision is missing' in message)


@pytest.mark.parametrize('changes, words', [
    ({'containerd_nvidia_runtime_name': 'runc'}, ["other than 'runc'", "got 'runc'"]),
    ({'containerd_nvidia_runc_options': {'SystemdCgroup': True, 'BinaryName': '/usr/bin/runc'}}, ['BinaryName is not allowed']),
    ({'containerd_nvidia_extra_runtimes': {'nvidia': {'runtime_type': 'io.containerd.runc.v2'}}}, ['entries not allowed', 'runc or nvidia']),
    ({'containerd_nvidia_cri_settings': {'sandbox_image': 'pause:3.9'}}, ["got keys [\"sandbox_image\"]"]),
    ({'containerd_nvidia_config_extra': {'version': 2}}, ['must not set \'version\'', 'plugins."io.containerd.grpc.v1.cri".containerd']),
    ({'containerd_nvidia_restart_timeout': 2}, ['between 5 and 600 seconds; got 2']),
    ({'containerd_nvidia_config_dropin': '/etc/containerd/99-nvidia.toml'},
     ["containerd_nvidia_config_dropin must be", "in a directory of its own", "got '/etc/containerd/99-nvidia.toml'"]),
    ({'containerd_nvidia_config_dropin': 'conf.d/99-nvidia.toml'}, ["got 'conf.d/99-nvidia.toml'"]),
    ({'containerd_nvidia_config_dropin': '/etc/containerd/conf.d/99-nvidia.conf'}, ["ending in .toml"]),
    ({'containerd_nvidia_repo_enabled': True, 'containerd_nvidia_repo_url': 'ftp://m.example/d',
      'containerd_nvidia_repo_key_fingerprint': '9DC8 5822 9FC7 DD38 854A E2D8 8D81 803C 0EBF CD88'},
     ["got containerd_nvidia_repo_url='ftp://m.example/d'"]),
])
def test_containerd_rules(changes, words):
    message = one_problem('containerd_nvidia', **changes)
    assert all(word in message for word in words), message


def test_the_whole_layout_needs_no_drop_in_path():
    assert problems_of('containerd_nvidia', containerd_nvidia_config_layout='whole',
                       containerd_nvidia_config_dropin='/etc/containerd/99-nvidia.toml') == []


def test_a_containerd_repository_needs_its_key_pinned():
    found = problems_of('containerd_nvidia', containerd_nvidia_repo_enabled=True,
                        containerd_nvidia_repo_key_url='http://download.docker.com/linux/debian/gpg')
    assert [message.split(':')[0] for message in found] == [
        "containerd_nvidia_repo_key_url is 'http", "containerd_nvidia_repo_key_fingerprint is ''"]


def test_the_toolkit_key_url_is_https_or_file():
    message = one_problem('container_toolkit', container_toolkit_repo_key_url='http://nvidia.github.io/libnvidia-container/gpgkey')
    assert message.startswith("container_toolkit_repo_key_url is 'http://nvidia.github.io/libnvidia-container/gpgkey': "
                              "expected an https:// or file:// URL")


def test_containerd_2_keeps_its_runtimes_under_the_cri_runtime_plugin():
    message = one_problem('containerd_nvidia', containerd_nvidia_version='2.1.9~ds1-1',
                          containerd_nvidia_config_extra={'plugins': {'io.containerd.cri.v1.runtime': {'containerd': {}}}})
    assert 'plugins."io.containerd.cri.v1.runtime".containerd' in message


# --------------------------------------------------------------------------- gpu_node_join


@pytest.mark.parametrize('version', ['latest', 'LATEST', 'Latest', ''])
def test_the_plugin_image_tag_is_pinned(version):
    message = one_problem('gpu_node_join', gpu_node_join_device_plugin_version=version)
    assert "a pinned tag (not empty, not 'latest')" in message


@pytest.mark.parametrize('name', ['NVIDIA_VISIBLE_DEVICES', 'MIG_STRATEGY', 'DEVICE_LIST_STRATEGY', 'CONFIG_FILE'])
def test_extra_env_cannot_override_what_the_role_sets(name):
    message = one_problem('gpu_node_join', gpu_node_join_device_plugin_extra_env={name: 'all', 'LOG_LEVEL': 'debug'})
    assert message.startswith('gpu_node_join_device_plugin_extra_env sets %s:' % name), message


def test_other_extra_env_is_allowed():
    assert problems_of('gpu_node_join', gpu_node_join_device_plugin_extra_env={'FAIL_ON_INIT_ERROR': 'true'}) == []


@pytest.mark.parametrize('value, kind', [(True, 'bool'), (3, 'int')])
def test_a_label_value_is_a_string(value, kind):
    message = one_problem('gpu_node_join', gpu_node_join_labels={'team/ml': value})
    assert 'label team/ml=%s (%s)' % (value, kind) in message and 'is not a string' in message


def test_a_label_that_kubernetes_rejects_is_named():
    message = one_problem('gpu_node_join', gpu_node_join_labels={'team/ml': 'a b'})
    assert message.startswith('label team/ml=a b (from gpu_node_join_pool_labels or gpu_node_join_labels)')


def test_an_invalid_tier_regex_is_reported_as_such():
    tiers = [{'tier': 'high', 'model_regex': '(H100', 'min_memory_mib': 40000},
             {'tier': 'standard', 'model_regex': '.*', 'min_memory_mib': 0}]
    message = one_problem('gpu_node_join', gpu_node_join_tiers=tiers)
    assert message.startswith("gpu_node_join_tiers[0].model_regex is '(H100': not a regular expression (missing ), "
                              "unterminated subpattern")


@pytest.mark.parametrize('changes, words', [
    ({'gpu_node_join_time_slicing_replicas': 1}, ['gpu_node_join_time_slicing_replicas=1 is not allowed']),
    ({'gpu_node_join_time_slicing_replicas': 8},
     ['gpu_node_join_time_slicing_replicas=8 is above gpu_node_join_time_slicing_max_replicas=4', 'oversubscription',
      'raise gpu_node_join_time_slicing_max_replicas']),
    ({'gpu_node_join_time_slicing_max_replicas': 0}, ['gpu_node_join_time_slicing_max_replicas=0 is not allowed', 'at least 1']),
    ({'gpu_node_join_time_slicing_replicas': 2, 'gpu_node_join_time_slicing_max_replicas': 1},
     ['gpu_node_join_time_slicing_replicas=2 is above gpu_node_join_time_slicing_max_replicas=1']),
    ({'gpu_node_join_time_slicing_replicas': 4, 'gpu_node_join_mig_strategy': 'mixed'}, ['mixed with gpu_node_join_time_slicing_replicas=4']),
    ({'gpu_node_join_onboarding_taint': {'key': 'nvidia.com/gpu', 'value': 'x', 'effect': 'NoSchedule'}}, ['is the pool taint\'s key']),
    ({'gpu_node_join_pool_taint': {'key': 'nvidia.com/gpu', 'value': 'a b', 'effect': 'NoSchedule'}}, ['not a valid taint']),
    ({'gpu_node_join_pool_taint': {'key': 'nvidia.com/gpu', 'value': 'present', 'effect': 'Never'}},
     ['value of effect must be one of: NoSchedule, PreferNoSchedule, NoExecute, got: Never']),
    ({'gpu_node_join_pool_labels': {}}, ['gpu_node_join_pool_labels is empty']),
    ({'gpu_node_join_kubelet_root_dir': 'var/lib/kubelet'}, ['gpu_node_join_kubelet_root_dir=var/lib/kubelet']),
    ({'gpu_node_join_wait_timeout': 0}, ['gpu_node_join_wait_timeout=0']),
    ({'gpu_node_join_device_plugin_namespace': 'NVIDIA'}, ['gpu_node_join_device_plugin_namespace=NVIDIA must be a DNS label']),
    ({'gpu_node_join_device_plugin_config': 'dev'}, ['gpu_node_join_device_plugin_config=dev needs gpu_node_join_device_plugin_named_configs=true']),
    ({'gpu_node_join_device_plugin_named_configs': True, 'gpu_node_join_device_plugin_config': 'default'},
     ['gpu_node_join_device_plugin_config=default is not allowed', "other than 'default'"]),
    ({'gpu_node_join_device_plugin_named_configs': True, 'gpu_node_join_device_plugin_config': 'dev shared'},
     ['gpu_node_join_device_plugin_config=dev shared is not allowed', 'at most 63']),
    ({'gpu_node_join_device_plugin_named_configs': True, 'gpu_node_join_time_slicing_replicas': 2},
     ['gpu_node_join_time_slicing_replicas=2 with gpu_node_join_device_plugin_named_configs=true needs gpu_node_join_device_plugin_config']),
    ({'gpu_node_join_device_plugin_named_configs': True, 'gpu_node_join_mig_strategy': 'single'},
     ['gpu_node_join_mig_strategy=single with gpu_node_join_device_plugin_named_configs=true needs gpu_node_join_device_plugin_config',
      'MIG strategy none']),
    ({'gpu_node_join_device_plugin_api_server': 'https://10.0.0.2:6443'},
     ['gpu_node_join_device_plugin_api_server=https://10.0.0.2:6443 is not allowed', 'HOST:PORT']),
])
def test_node_join_rules(changes, words):
    found = problems_of('gpu_node_join', **changes)
    assert any(all(word in message for word in words) for message in found), found


# --------------------------------------------------------------------------- gpu_self_check


@pytest.mark.parametrize('interval', ['30s', '5min', '1h 30min', '2 hours', '1w'])
def test_time_spans_pass(interval):
    assert problems_of('gpu_self_check', gpu_self_check_interval=interval) == []


@pytest.mark.parametrize('interval, words', [
    ('0s', ["gpu_self_check_interval is '0s': the self-check would run without pause", 'at least 1s']),
    ('0min 0s', ['without pause']),
    ('often', ["gpu_self_check_interval is 'often': expected a systemd time span"]),
    ('5', ["gpu_self_check_interval is '5': expected a systemd time span"]),
])
def test_bad_intervals_fail(interval, words):
    message = one_problem('gpu_self_check', gpu_self_check_interval=interval)
    assert all(word in message for word in words), message


@pytest.mark.parametrize('changes, words', [
    ({'gpu_self_check_node_name': 'GPU_1'}, ["gpu_self_check_node_name is 'GPU_1'"]),
    ({'gpu_self_check_kubeconfig': 'kubeconfig', 'gpu_self_check_host_root': 'host'},
     ["gpu_self_check_kubeconfig is 'kubeconfig' and gpu_self_check_host_root is 'host': a path on the host must be absolute."]),
    ({'gpu_self_check_expected_driver_version': 'new'}, ["gpu_self_check_expected_driver_version is 'new'"]),
])
def test_self_check_rules(changes, words):
    message = one_problem('gpu_self_check', **changes)
    assert all(word in message for word in words), message


# --------------------------------------------------------------------------- mig_layout

MIG_CONFIGS = {'version': 'v1',
               'mig-configs': {'all-1g.10gb': [{'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1g.10gb': 7}}]}}


def test_a_mig_layout_chosen_from_its_configuration_passes():
    assert problems_of('mig_layout', mig_layout_configs=MIG_CONFIGS, mig_layout_config='all-1g.10gb') == []


@pytest.mark.parametrize(('changes', 'expected'), [
    ({'mig_layout_config': 'all-1g.10gb'}, "mig_layout_config is 'all-1g.10gb': mig_layout_configs defines no such layout (none)"),
    ({'mig_layout_configs': MIG_CONFIGS, 'mig_layout_config': 'balanced'},
     "mig_layout_config is 'balanced': mig_layout_configs defines no such layout (all-1g.10gb)"),
    ({'mig_layout_configs': dict(MIG_CONFIGS, version=1)}, 'mig_layout_configs.version is 1: the mig-parted configuration format'),
    ({'mig_layout_configs': 'all-1g.10gb'}, 'mig_layout: argument \'mig_layout_configs\' is of type'),
])
def test_a_bad_mig_layout_is_named(changes, expected):
    assert expected in one_problem('mig_layout', **changes)
