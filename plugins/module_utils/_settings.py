# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rules between a role's settings that its argument spec cannot express.

Each role's rules take the role's variables as the inventory gave them (before the argument spec converts a
value: a YAML number given for a version is seen as a number), the host's platform facts and the role's platform
data (``context``), and return one message per problem, naming the variable, the value and what is allowed.
The action plugin gpufleet.node.validate_settings runs them with the argument spec, in each role's preflight and
in the validation play that opens every playbook.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import posixpath
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.node.plugins.module_utils import _cuda, _mig, _openpgp

URL = re.compile(r'^(https?|file)://[^\s]+$')
SECURE_URL = re.compile(r'^(https|file)://[^\s]+$')
LABEL_VALUE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$')
LABEL_KEY = re.compile(r'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?'
                       r'[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')
DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')
DNS_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
PACKAGE_NAME = re.compile(r'^[a-z0-9][a-z0-9.+-]+$')
PACKAGE_VERSION = re.compile(r'^([0-9]+:)?[0-9][A-Za-z0-9.+~]*(-[A-Za-z0-9.+~]+)?$')
DRIVER_VERSION = re.compile(r'^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{2})?$')
TOOLKIT_VERSION = re.compile(r'^[0-9]+\.[0-9]+\.[0-9]+(~rc\.[0-9]+)?-[0-9]+$')
# An exact Debian package version of containerd: the upstream version, then '-' and the package revision.
CONTAINERD_VERSION = re.compile(r'^([0-9]+:)?([0-9]+)\.[0-9]+\.[0-9]+[A-Za-z0-9.+~]*-[A-Za-z0-9.+~]+$')
HANDLER = re.compile(r'^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$')
# A systemd time span ('30s', '5min', '1h 30min'); longer unit names first, so that each part reads whole.
TIME_SPAN_UNITS = (('us', 1e-6), ('ms', 1e-3), ('seconds', 1), ('second', 1), ('sec', 1), ('s', 1), ('minutes', 60),
                   ('minute', 60), ('min', 60), ('m', 60), ('hours', 3600), ('hour', 3600), ('hr', 3600), ('h', 3600),
                   ('days', 86400), ('day', 86400), ('d', 86400), ('weeks', 604800), ('week', 604800), ('w', 604800))
TIME_SPAN_PART = r'([0-9]+) ?(%s) ?' % '|'.join(unit for unit, _seconds in TIME_SPAN_UNITS)
TIME_SPAN = re.compile(r'^(%s)+$' % TIME_SPAN_PART)
TAINT_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')
# What the role's DaemonSet sets itself, and the plugin's own settings the role's configuration owns: an extra
# variable of the same name would silently override them (NVIDIA's plugin reads each flag from this variable).
PLUGIN_OWNED_ENV = ('CONFIG_FILE', 'NVIDIA_VISIBLE_DEVICES', 'NVIDIA_DRIVER_CAPABILITIES', 'NVIDIA_MIG_MONITOR_DEVICES',
                    'MIG_STRATEGY', 'DEVICE_LIST_STRATEGY', 'DEVICE_ID_STRATEGY', 'KUBELET_SOCKET')
TOOLKIT_OWNED_KEYS = ('accept-nvidia-visible-devices-envvar-when-unprivileged',
                      'accept-nvidia-visible-devices-as-volume-mounts')
ARMORED_KEY = ('-----BEGIN PGP PUBLIC KEY BLOCK-----', '-----END PGP PUBLIC KEY BLOCK-----')


def problems(role, settings, facts=None, context=None):
    """Every problem of ``role``'s settings, in the order the role's preflight always reported them."""
    return RULES[role](settings, facts or {}, context or {})


def as_given(converted, given):
    """The settings after the argument spec's conversion, except a number given for a text setting.

    The conversion turns a YAML number into text (550.90, read as 550.9, becomes '550.9'); the rules must see that a
    number was given to say why the value is wrong.
    """
    settings = dict(converted)
    for name, value in given.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(settings.get(name), str):
            settings[name] = value
    return settings


# --------------------------------------------------------------------------- helpers


def _text(value):
    """A value as Jinja prints it in the messages (True, not true; lists and dicts in Python's form)."""
    return '' if value is None else str(value)


def _json(value):
    return json.dumps(value, sort_keys=False)


def _whole(value):
    """``value`` as Jinja's int filter reads it: 0 for what is not a number."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _matches(pattern, value):
    return isinstance(value, str) and pattern.match(value) is not None


def _platform(facts):
    return '%s %s' % (facts.get('distribution', '?'), facts.get('distribution_version', '?'))


def _time_span_seconds(value):
    """Seconds of a systemd time span such as '5min' or '1h 30min'; None when it is not one."""
    if not isinstance(value, str) or not TIME_SPAN.match(value):
        return None
    seconds = dict(TIME_SPAN_UNITS)
    return sum(int(amount) * seconds[unit] for amount, unit in re.findall(TIME_SPAN_PART, value))


# --------------------------------------------------------------------------- nvidia_driver


def nvidia_driver(s, facts, context):
    out = []
    platforms = context.get('supported_platforms', {})
    if facts.get('distribution_major_version') not in platforms.get(facts.get('distribution'), []):
        out.append('nvidia_driver: %s is not supported. Supported: Debian 12, 13 and Ubuntu 22.04, 24.04.'
                   % _platform(facts))
    architectures = context.get('supported_architectures', [])
    if facts.get('architecture') not in architectures:
        out.append('nvidia_driver: architecture %s is not supported. Supported: %s.'
                   % (facts.get('architecture'), ', '.join(architectures)))
    out += _driver_version_problems(s['nvidia_driver_version'])
    out += _driver_source_problems(s)
    out += _driver_package_problems(s)
    out += _driver_mirror_problems(s)
    out += _driver_key_problems(s)
    modules = s['nvidia_driver_modules_load']
    if 'nvidia-uvm' not in modules and 'nvidia_uvm' not in modules:
        out.append('nvidia_driver_modules_load is %s: it must contain nvidia-uvm. Without nvidia_uvm, nvidia-smi '
                   'works but every CUDA program fails with "unknown error".' % _text(modules))
    out += _driver_cuda_problems(s)
    key, cert = s['nvidia_driver_dkms_signing_key'], s['nvidia_driver_dkms_signing_cert']
    if bool(key) != bool(cert):
        out.append("nvidia_driver_dkms_signing_key is '%s' and nvidia_driver_dkms_signing_cert is '%s': set both "
                   "(paths on the host) or neither." % (_text(key), _text(cert)))
    return out


def _driver_version_problems(version):
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return ["nvidia_driver_version is %s, a number: YAML reads an unquoted version as a number and drops its "
                "trailing zeros (550.90 becomes 550.9). Quote it: nvidia_driver_version: \"535.261.03\"." % version]
    if not _matches(DRIVER_VERSION, version):
        return ["nvidia_driver_version is '%s': expected an NVIDIA driver version such as 535.261.03 "
                "(branch.minor.patch, digits only, quoted in YAML). A package version such as 535.261.03-1 belongs "
                "in nvidia_driver_package_version." % _text(version)]
    return []


def _driver_cuda_problems(s):
    cuda_versions = s.get('nvidia_driver_cuda_versions') or []
    problems = _cuda.release_problems(cuda_versions, 'nvidia_driver_cuda_versions')
    if problems or _driver_version_problems(s['nvidia_driver_version']):
        return problems
    return _cuda.driver_problems(s['nvidia_driver_version'], cuda_versions, boolean(s.get('nvidia_driver_cuda_forward_compat') or False),
                                 ('nvidia_driver_version', 'nvidia_driver_cuda_versions', 'nvidia_driver_cuda_forward_compat'))


def _driver_source_problems(s):
    out = []
    urls = [('nvidia_driver_distribution_url', bool(s['nvidia_driver_distribution_url']), URL, 'http://, https://'),
            ('nvidia_driver_cuda_url', s['nvidia_driver_source'] == 'cuda', SECURE_URL, 'https://'),
            ('nvidia_driver_mirror_url', s['nvidia_driver_source'] == 'mirror', URL, 'http://, https://')]
    for name, checked, pattern, schemes in urls:
        if checked and not _matches(pattern, s[name]):
            out.append("%s is '%s': expected a URL starting with %s or file://." % (name, _text(s[name]), schemes))
    for name, least in (('nvidia_driver_apt_cache_valid_time', 0), ('nvidia_driver_reboot_timeout', 1),
                        ('nvidia_driver_expected_gpu_count', 0)):
        if _whole(s[name]) < least:
            out.append('%s is %s: expected an integer of at least %d.' % (name, _text(s[name]), least))
    return out


def _driver_package_problems(s):
    out = []
    for name, version in s['nvidia_driver_package_versions'].items():
        if not (_matches(PACKAGE_NAME, name) and _matches(PACKAGE_VERSION, version)):
            out.append("nvidia_driver_package_versions has '%s: %s': expected a package name (lower case letters, "
                       "digits, + - .) mapped to an exact package version such as 535.261.03-1 (quoted in YAML)."
                       % (name, _text(version)))
    for package in s['nvidia_driver_extra_packages']:
        if not _matches(PACKAGE_NAME, package):
            out.append("nvidia_driver_extra_packages has '%s': expected a package name without version (lower case "
                       "letters, digits, + - .); versions go in nvidia_driver_package_versions." % _text(package))
    version, package_version = _text(s['nvidia_driver_version']), s['nvidia_driver_package_version']
    if package_version and not (_matches(PACKAGE_VERSION, package_version)
                                and re.sub('^[0-9]+:', '', package_version).startswith(version + '-')):
        out.append("nvidia_driver_package_version is '%s': expected empty or the exact package version of driver %s, "
                   "'%s-<revision>' (for example %s-1). It must start with nvidia_driver_version."
                   % (package_version, version, version, version))
    return out


def _driver_mirror_problems(s):
    key, suites, components = (s['nvidia_driver_mirror_signing_key'], s['nvidia_driver_mirror_suites'],
                               s['nvidia_driver_mirror_components'])
    if s['nvidia_driver_source'] != 'mirror' or (key and suites and (components or suites == ['/'])):
        return []
    return ['nvidia_driver_source is \'mirror\', but the mirror is incomplete: nvidia_driver_mirror_signing_key is %s, '
            'nvidia_driver_mirror_suites is %s, nvidia_driver_mirror_components is %s. A mirror needs its signing key '
            '(URL, path or ASCII-armored key: the role writes no unsigned repository), at least one suite, and '
            'components unless the suite is \'/\' (flat repository).'
            % ('set' if key else 'empty', _text(suites), _text(components))]


def _driver_key_problems(s):
    """The key of the cuda or mirror source: a URL given for it is https:// or file://, its fingerprint pinned."""
    source = s['nvidia_driver_source']
    if source not in ('cuda', 'mirror'):
        return []
    key_var = 'nvidia_driver_%s_signing_key' % source
    return _openpgp.key_source_problems(key_var, _openpgp.key_url(s[key_var]), key_var + '_fingerprint',
                                        s[key_var + '_fingerprint'])


# --------------------------------------------------------------------------- container_toolkit


def container_toolkit(s, facts, context):
    out = []
    if not context.get('platform_supported'):
        out.append('container_toolkit supports Debian and Ubuntu (apt family); this host runs %s.' % _platform(facts))
    if not _matches(TOOLKIT_VERSION, s['container_toolkit_version']):
        out.append("container_toolkit_version must be the exact Debian version of NVIDIA's toolkit packages, like "
                   "'1.17.8-1' or '1.18.0~rc.1-1'; got '%s'." % _text(s['container_toolkit_version']))
    out += _toolkit_repo_problems(s)
    out += _toolkit_config_problems(s)
    cdi_path = s['container_toolkit_cdi_spec_path']
    cdi_dirs = context.get('cdi_dirs', [])
    if s['container_toolkit_cdi_enabled'] and not (
            isinstance(cdi_path, str) and cdi_path.rsplit('/', 1)[0] in cdi_dirs
            and re.match(r'^/[^\s]+\.(yaml|json)$', cdi_path)):
        out.append('container_toolkit_cdi_spec_path must be a .yaml or .json file directly in one of the CDI spec '
                   "directories %s (where containerd and the runtime look); got '%s'."
                   % (', '.join(cdi_dirs), _text(cdi_path)))
    if not _matches(re.compile(r'^/[^\s]*$'), s['container_toolkit_host_root']):
        out.append("container_toolkit_host_root must be an absolute path (/ on real hosts); got '%s'."
                   % _text(s['container_toolkit_host_root']))
    return out


def _toolkit_repo_problems(s):
    if not s['container_toolkit_repo_manage']:
        return []
    out = []
    content = s['container_toolkit_repo_key_content']
    if not _matches(re.compile(r'^(https?://|file:/)[^\s]+$'), s['container_toolkit_repo_url']):
        out.append("container_toolkit_repo_url is '%s': expected an http://, https:// or file:/ URL without spaces."
                   % _text(s['container_toolkit_repo_url']))
    out += _openpgp.key_source_problems('container_toolkit_repo_key_url', '' if content else s['container_toolkit_repo_key_url'],
                                        'container_toolkit_repo_key_fingerprint', s['container_toolkit_repo_key_fingerprint'])
    if content and not all(marker in content for marker in ARMORED_KEY):
        out.append('container_toolkit_repo_key_content must be an ASCII-armored PGP public key block '
                   '(-----BEGIN PGP PUBLIC KEY BLOCK----- ... -----END PGP PUBLIC KEY BLOCK-----), or "" to download '
                   "container_toolkit_repo_key_url; got %d characters starting with '%s'." % (len(content), content[:30]))
    return out


def _toolkit_config_problems(s):
    config = s['container_toolkit_config']
    runtime = config.get('nvidia-container-runtime') or {}
    owned = [key for key in TOOLKIT_OWNED_KEYS if key in config]
    if owned or 'mode' in runtime or 'log-level' in runtime or re.search(r':\s*null', _json(config)):
        return ['container_toolkit_config must not set accept-nvidia-visible-devices-envvar-when-unprivileged, '
                'accept-nvidia-visible-devices-as-volume-mounts, nvidia-container-runtime.mode or .log-level (use '
                'container_toolkit_accept_envvar_when_unprivileged, container_toolkit_accept_devices_as_volume_mounts, '
                'container_toolkit_runtime_mode and container_toolkit_log_level) and must not hold empty (null) '
                'values; got %s.' % _json(config)]
    return []


# --------------------------------------------------------------------------- containerd_nvidia


def containerd_runtime_plugin(version):
    """The CRI plugin that holds the runtimes: config version 3 (containerd 2.x) moved it."""
    match = CONTAINERD_VERSION.match(version) if isinstance(version, str) else None
    major = int(match.group(2)) if match else 0
    return 'io.containerd.cri.v1.runtime' if major >= 2 else 'io.containerd.grpc.v1.cri'


def containerd_nvidia(s, facts, context):
    out = []
    if not context.get('platform_supported'):
        out.append('containerd_nvidia supports Debian and Ubuntu (apt family); this host runs %s.' % _platform(facts))
    out += _containerd_version_problems(s['containerd_nvidia_version'])
    name = s['containerd_nvidia_runtime_name']
    if not _matches(HANDLER, name) or name == 'runc':
        out.append("containerd_nvidia_runtime_name must be a runtime handler name of lowercase letters, digits, '-' and "
                   "'_' other than 'runc' (the RuntimeClass handler, normally 'nvidia'); got '%s'." % _text(name))
    binary, config_path = s['containerd_nvidia_runtime_binary'], s['containerd_nvidia_config_path']
    if not (_matches(re.compile(r'^/[^\s]+$'), binary) and _matches(re.compile(r'^/[^\s]+\.toml$'), config_path)):
        out.append("containerd_nvidia_runtime_binary and containerd_nvidia_config_path must be absolute paths without "
                   "spaces (config path ending in .toml); got containerd_nvidia_runtime_binary='%s', "
                   "containerd_nvidia_config_path='%s'." % (_text(binary), _text(config_path)))
    dropin = s['containerd_nvidia_config_dropin']
    if s['containerd_nvidia_config_layout'] == 'drop-in' and not (
            _matches(re.compile(r'^/[^\s]+/[^\s/]+\.toml$'), dropin) and isinstance(config_path, str)
            and posixpath.dirname(dropin) != posixpath.dirname(config_path)):
        out.append("containerd_nvidia_config_dropin must be an absolute path without spaces ending in .toml, in a "
                   "directory of its own: config.toml imports every .toml file of that directory; got '%s' (config: "
                   "'%s')." % (_text(dropin), _text(config_path)))
    out += _containerd_runtime_problems(s)
    out += _containerd_config_problems(s)
    return out


def _containerd_version_problems(version):
    match = CONTAINERD_VERSION.match(version) if isinstance(version, str) else None
    if match and int(match.group(2)) in (1, 2):
        return []
    missing_revision = isinstance(version, str) and re.match(r'^([0-9]+:)?[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+~]*$',
                                                             version)
    hint = (' The package revision is missing: apt pins and holds an exact package version, such as %s-1.'
            % version if missing_revision else '')
    return ["containerd_nvidia_version must be the exact package version of containerd 1.x or 2.x (e.g. "
            "'1.6.20~ds1-1+deb12u3', '1.7.27-1', '2.1.9~ds1-1'); got '%s'.%s" % (_text(version), hint)]


def _containerd_runtime_problems(s):
    out = []
    runc_options = s['containerd_nvidia_runc_options']
    if 'BinaryName' in runc_options or not isinstance(runc_options.get('SystemdCgroup', False), bool):
        out.append('containerd_nvidia_runc_options are the runc options shared by runc and the nvidia runtime: '
                   'BinaryName is not allowed there (set containerd_nvidia_runtime_binary) and SystemdCgroup must be '
                   'true or false; got %s.' % _json(runc_options))
    reserved = ['runc', s['containerd_nvidia_runtime_name']]
    bad = {name: runtime for name, runtime in s['containerd_nvidia_extra_runtimes'].items()
           if name in reserved or not _matches(HANDLER, name) or not isinstance(runtime, dict)
           or not isinstance(runtime.get('runtime_type', ''), str) or not runtime.get('runtime_type')}
    if bad:
        out.append('containerd_nvidia_extra_runtimes entries not allowed: %s. Names must be handler names other than '
                   '%s (the role owns those) and each entry must be a mapping with a runtime_type (e.g. '
                   'io.containerd.kata.v2).' % (_json(bad), ' or '.join(_text(name) for name in reserved)))
    return out


def _containerd_config_problems(s):
    out = []
    cri = s['containerd_nvidia_cri_settings']
    if any(key in cri for key in ('containerd', 'sandbox_image', 'registry')):
        out.append("containerd_nvidia_cri_settings must not set 'containerd' (runtimes: use "
                   "containerd_nvidia_extra_runtimes and containerd_nvidia_mode), 'sandbox_image' (use "
                   "containerd_nvidia_sandbox_image) or 'registry' (use containerd_nvidia_registry_config_path); got "
                   "keys %s." % _json(list(cri)))
    extra = s['containerd_nvidia_config_extra']
    plugin = containerd_runtime_plugin(s['containerd_nvidia_version'])
    if 'version' in extra or 'containerd' in ((extra.get('plugins') or {}).get(plugin) or {}):
        out.append('containerd_nvidia_config_extra must not set \'version\' (the role derives it from '
                   'containerd_nvidia_version) nor plugins."%s".containerd (the runtimes, owned by the role); got %s.'
                   % (plugin, _json(extra)))
    sandbox, registry = s['containerd_nvidia_sandbox_image'], s['containerd_nvidia_registry_config_path']
    if not (_matches(re.compile(r'^[^\s]*$'), sandbox) and _matches(re.compile(r'^(/[^\s]*)?$'), registry)):
        out.append('containerd_nvidia_sandbox_image must be an image reference without spaces and '
                   'containerd_nvidia_registry_config_path an absolute directory (or "" for unset); got \'%s\' and '
                   "'%s'." % (_text(sandbox), _text(registry)))
    if not 5 <= _whole(s['containerd_nvidia_restart_timeout']) <= 600:
        out.append('containerd_nvidia_restart_timeout must be between 5 and 600 seconds; got %s.'
                   % _text(s['containerd_nvidia_restart_timeout']))
    content = s['containerd_nvidia_repo_key_content']
    if s['containerd_nvidia_repo_enabled'] and not (
            _matches(re.compile(r'^(https?|file):/'), s['containerd_nvidia_repo_url'])
            and (not content or ARMORED_KEY[0] in content)):
        out.append("containerd_nvidia_repo_url must be an http(s):// or file:/ URL and containerd_nvidia_repo_key_content "
                   "an ASCII-armored PGP public key block (or \"\"); got containerd_nvidia_repo_url='%s'."
                   % _text(s['containerd_nvidia_repo_url']))
    if s['containerd_nvidia_repo_enabled']:
        out += _openpgp.key_source_problems('containerd_nvidia_repo_key_url', '' if content else s['containerd_nvidia_repo_key_url'],
                                            'containerd_nvidia_repo_key_fingerprint', s['containerd_nvidia_repo_key_fingerprint'])
    return out


# --------------------------------------------------------------------------- gpu_node_join


def gpu_node_join(s, facts, context):
    out = _taint_problems(s) + _label_problems(s)
    replicas = s['gpu_node_join_time_slicing_replicas']
    if not re.match(r'^[0-9]+$', _text(replicas)) or _whole(replicas) == 1:
        out.append('gpu_node_join_time_slicing_replicas=%s is not allowed: use 0 (no sharing) or an integer of at '
                   'least 2.' % _text(replicas))
    out += _sharing_cap_problems(replicas, s.get('gpu_node_join_time_slicing_max_replicas', 4))
    if s['gpu_node_join_mig_strategy'] == 'mixed' and _whole(replicas) > 0:
        out.append('gpu_node_join_mig_strategy=mixed with gpu_node_join_time_slicing_replicas=%s is not supported by '
                   'this role: time-slicing applies to nvidia.com/gpu; use migStrategy none or single with sharing.'
                   % _text(replicas))
    out += _node_setting_problems(s)
    out += _tier_regex_problems(s['gpu_node_join_tiers'])
    out += _plugin_problems(s)
    out += _named_config_problems(s)
    return out


def _named_config_problems(s):
    name = s.get('gpu_node_join_device_plugin_config', '')
    named = boolean(s.get('gpu_node_join_device_plugin_named_configs', False), strict=False)
    api_server = _text(s.get('gpu_node_join_device_plugin_api_server', ''))
    out = []
    if name and not named:
        out.append('gpu_node_join_device_plugin_config=%s needs gpu_node_join_device_plugin_named_configs=true for the whole '
                   'GPU node group: without it the device plugin reads one configuration on every node, and no node '
                   'label selects another.' % _text(name))
    if named and not name and _whole(s['gpu_node_join_time_slicing_replicas']) > 0:
        out.append('gpu_node_join_time_slicing_replicas=%s with gpu_node_join_device_plugin_named_configs=true needs '
                   'gpu_node_join_device_plugin_config: with named configurations the shared configuration never '
                   'shares GPUs, so that changing a group\'s sharing restarts only that group\'s plugin. Name the '
                   'configuration of the nodes that share their GPUs.' % _text(s['gpu_node_join_time_slicing_replicas']))
    if named and not name and s['gpu_node_join_mig_strategy'] != 'none':
        out.append('gpu_node_join_mig_strategy=%s with gpu_node_join_device_plugin_named_configs=true needs '
                   'gpu_node_join_device_plugin_config: with named configurations the shared configuration runs MIG '
                   'strategy none, so that changing a group\'s MIG strategy restarts only that group\'s plugin. Name the '
                   'configuration of the nodes whose GPUs are partitioned, or use none.' % _text(s['gpu_node_join_mig_strategy']))
    if name and (name == 'default' or not _matches(LABEL_VALUE, _text(name))):
        out.append("gpu_node_join_device_plugin_config=%s is not allowed: use '' (the shared configuration) or a name "
                   "other than 'default' of at most 63 letters, digits, '-', '_' and '.', alphanumeric at both ends (it is "
                   "a node label's value and a key of the plugin's ConfigMap)." % _text(name))
    if api_server and not re.match(r'^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):[0-9]{1,5}$', api_server):
        out.append('gpu_node_join_device_plugin_api_server=%s is not allowed: use HOST:PORT (an IPv6 address in '
                   'brackets), or empty for the cluster\'s kubernetes Service.' % api_server)
    return out


def _sharing_cap_problems(replicas, cap):
    if isinstance(cap, bool) or not re.match(r'^[0-9]+$', _text(cap)) or _whole(cap) < 1:
        return ['gpu_node_join_time_slicing_max_replicas=%s is not allowed: use an integer of at least 1 (1 allows no '
                'sharing; the default, 4, is the most pods per GPU before contention dominates).' % _text(cap)]
    if re.match(r'^[0-9]+$', _text(replicas)) and _whole(replicas) > _whole(cap):
        return ['gpu_node_join_time_slicing_replicas=%s is above gpu_node_join_time_slicing_max_replicas=%s: time-slicing '
                'is oversubscription, with no memory or fault isolation, and each pod waits for the others\' time slices; '
                'beyond 4 pods per GPU a 20 ms step can take 200 ms. Use at most %s replicas, or raise '
                'gpu_node_join_time_slicing_max_replicas in the inventory when that contention is meant.'
                % (_text(replicas), _text(cap), _text(cap))]
    return []


def _taint_problems(s):
    out = []
    pool, onboarding = s['gpu_node_join_pool_taint'], s['gpu_node_join_onboarding_taint']
    taints = (('gpu_node_join_pool_taint', pool), ('gpu_node_join_onboarding_taint', onboarding))
    bad = ['%s=%s' % (name, _text(taint)) for name, taint in taints
           if not (_matches(LABEL_KEY, taint.get('key')) and _matches(LABEL_VALUE, _text(taint.get('value', '')))
                   and taint.get('effect') in TAINT_EFFECTS)]
    if bad:
        out.append("%s: not a valid taint: the key must be a Kubernetes label key, the value at most 63 characters of "
                   "letters, digits, '-', '_' and '.', alphanumeric at both ends, and the effect one of NoSchedule, "
                   "PreferNoSchedule, NoExecute." % ' and '.join(bad))
    if onboarding.get('key') == pool.get('key'):
        out.append("gpu_node_join_onboarding_taint.key=%s is the pool taint's key: the onboarding taint is removed when "
                   "onboarding ends, so it needs a key of its own." % _text(onboarding.get('key')))
    return out


def _label_problems(s):
    out = []
    labels = dict(s['gpu_node_join_pool_labels'], **s['gpu_node_join_labels'])
    bad = ['%s=%s' % (key, _text(value)) for key, value in labels.items()
           if not (_matches(LABEL_KEY, key) and _matches(LABEL_VALUE, _text(value)))]
    if bad:
        out.append("label %s (from gpu_node_join_pool_labels or gpu_node_join_labels) would be rejected by Kubernetes: "
                   "keys are an optional DNS prefix and '/' then a name; values are at most 63 characters of letters, "
                   "digits, '-', '_' and '.', alphanumeric at both ends." % ', '.join(bad))
    typed = ['%s=%s (%s)' % (key, _text(value), type(value).__name__) for key, value in labels.items()
             if not isinstance(value, str)]
    if typed:
        out.append('label %s (from gpu_node_join_pool_labels or gpu_node_join_labels) is not a string: Kubernetes label '
                   'values are strings, and YAML reads true, yes, on or 1 unquoted as a boolean or a number. Quote the '
                   'value ("true").' % ', '.join(typed))
    if not s['gpu_node_join_pool_labels']:
        out.append('gpu_node_join_pool_labels is empty: the device plugin DaemonSet selects GPU nodes by these labels.')
    return out


def _node_setting_problems(s):
    root, tier_label, tiers = (s['gpu_node_join_kubelet_root_dir'], s['gpu_node_join_tier_label'],
                               s['gpu_node_join_tiers'])
    tier_names = [tier.get('tier') for tier in tiers]
    if ((root == '' or _matches(re.compile('^/'), root))
            and (tier_label == '' or _matches(LABEL_KEY, tier_label))
            and all(_matches(LABEL_VALUE, _text(name)) for name in tier_names)
            and _whole(s['gpu_node_join_wait_timeout']) > 0 and _whole(s['gpu_node_join_wait_delay']) > 0):
        return []
    return ['Invalid setting: gpu_node_join_kubelet_root_dir=%s (empty or an absolute path), gpu_node_join_tier_label=%s '
            '(a label key or empty), gpu_node_join_tiers tiers=%s (label values), gpu_node_join_wait_timeout=%s and '
            'gpu_node_join_wait_delay=%s (positive seconds).'
            % (_text(root), _text(tier_label), _text(tier_names), _text(s['gpu_node_join_wait_timeout']),
               _text(s['gpu_node_join_wait_delay']))]


def _tier_regex_problems(tiers):
    out = []
    for index, tier in enumerate(tiers):
        pattern = tier.get('model_regex', '')
        try:
            re.compile(_text(pattern))
        except re.error as error:
            out.append("gpu_node_join_tiers[%d].model_regex is '%s': not a regular expression (%s); expected a Python "
                       "regular expression matched against the GPU model name, such as '(H100|H200)' or '.*'."
                       % (index, _text(pattern), error))
    return out


def _plugin_problems(s):
    out = []
    namespace, version = s['gpu_node_join_device_plugin_namespace'], s['gpu_node_join_device_plugin_version']
    if not (_matches(DNS_LABEL, namespace) and _text(version) and _text(version).lower() != 'latest'):
        out.append("gpu_node_join_device_plugin_namespace=%s must be a DNS label, and "
                   "gpu_node_join_device_plugin_version=%s a pinned tag (not empty, not 'latest')."
                   % (_text(namespace), _text(version)))
    owned = sorted(name for name in s['gpu_node_join_device_plugin_extra_env'] if name in PLUGIN_OWNED_ENV)
    if owned:
        out.append('gpu_node_join_device_plugin_extra_env sets %s: the role sets these itself (the device plugin\'s '
                   'configuration, its GPUs and its kubelet socket), and an extra variable would silently override '
                   'them. Use the role\'s variables instead (gpu_node_join_mig_strategy, '
                   'gpu_node_join_device_list_strategy, gpu_node_join_device_id_strategy, gpu_node_join_kubelet_root_dir).'
                   % ', '.join(owned))
    return out


# --------------------------------------------------------------------------- gpu_self_check


def gpu_self_check(s, facts, context):
    out = []
    interval = s['gpu_self_check_interval']
    seconds = _time_span_seconds(interval)
    if seconds is None:
        out.append("gpu_self_check_interval is '%s': expected a systemd time span such as 30s, 5min, 1h or 1h 30min."
                   % _text(interval))
    elif seconds < 1:
        out.append("gpu_self_check_interval is '%s': the self-check would run without pause; expected at least 1s, "
                   "such as 30s, 5min or 1h." % _text(interval))
    node = s['gpu_self_check_node_name']
    if not (isinstance(node, str) and len(node) <= 253 and DNS_SUBDOMAIN.match(node)):
        out.append("gpu_self_check_node_name is '%s': a Node name is a DNS subdomain (lowercase letters, digits, '-' "
                   "and '.', at most 253 characters)." % _text(node))
    relative = ["%s is '%s'" % (name, _text(s[name])) for name in ('gpu_self_check_kubeconfig', 'gpu_self_check_host_root')
                if not _text(s[name]).startswith('/')]
    if relative:
        out.append('%s: a path on the host must be absolute.' % ' and '.join(relative))
    expected = s['gpu_self_check_expected_driver_version']
    if not _matches(re.compile(r'^([0-9]+(\.[0-9]+)+)?$'), expected):
        out.append("gpu_self_check_expected_driver_version is '%s': expected a driver version such as 535.261.03, or "
                   "empty." % _text(expected))
    return out


# --------------------------------------------------------------------------- mig_layout


def mig_layout(s, facts, context):
    """The mig-parted configuration and the layout chosen from it; whether the node's GPUs can hold it is decided on the
    node (NVIDIA's table per GPU model, module_utils/_mig.py)."""
    configs, names = s['mig_layout_configs'], ('mig_layout_configs', 'mig_layout_config')
    problems = _mig.config_problems(configs, names[0]) if configs not in (None, {}) else []
    return problems or _mig.selection_problems(configs or {}, s['mig_layout_config'], names)


# --------------------------------------------------------------------------- the playbook's agreement of the roles


def runtime_strategy_problems(s):
    """Why the container toolkit, containerd and the device plugin would not agree on how GPUs reach a pod.

    The playbooks compose the roles, so they, not a role, compare the roles' settings: ``s`` holds
    gpu_node_join_device_list_strategy, gpu_node_join_runtime_class, containerd_nvidia_mode,
    containerd_nvidia_cdi_enabled and container_toolkit_accept_envvar_when_unprivileged,
    container_toolkit_accept_devices_as_volume_mounts, container_toolkit_runtime_mode, container_toolkit_cdi_enabled
    (each role's own default where the inventory sets none)."""
    strategy = s['gpu_node_join_device_list_strategy']
    named = 'gpu_node_join_device_list_strategy=' + strategy
    out = _envvar_strategy_problems(s, strategy, named) + _mounts_strategy_problems(s, strategy, named)
    if strategy == 'cdi-annotations':
        out += _cdi_strategy_problems(s, named)
    mode = s['containerd_nvidia_mode']
    runtime_class = boolean(s['gpu_node_join_runtime_class'], strict=False)
    if (mode == 'runtimeclass') != runtime_class:
        out.append('containerd_nvidia_mode is %s but gpu_node_join_runtime_class is %s: %s' % (
            mode, str(runtime_class).lower(),
            'the nvidia runtime is not the default, so pods get GPUs only through a RuntimeClass; set '
            'gpu_node_join_runtime_class=true' if mode == 'runtimeclass'
            else 'set gpu_node_join_runtime_class=true only with containerd_nvidia_mode=runtimeclass'))
    return out


def _envvar_strategy_problems(s, strategy, named):
    envvar = boolean(s['container_toolkit_accept_envvar_when_unprivileged'], strict=False)
    if strategy == 'envvar' and not envvar:
        return [named + ' needs container_toolkit_accept_envvar_when_unprivileged=true, but it is false (the secure '
                'setting), so the runtime would ignore every allocation; use the strategy volume-mounts, or accept the '
                'INSECURE envvar setting explicitly']
    if strategy != 'envvar' and envvar:
        return [named + ' is meant to keep GPUs from pods that set NVIDIA_VISIBLE_DEVICES themselves, but '
                'container_toolkit_accept_envvar_when_unprivileged=true lets any pod of the nvidia runtime take every '
                'GPU; set it to false, or choose the strategy envvar explicitly']
    return []


def _mounts_strategy_problems(s, strategy, named):
    if strategy != 'volume-mounts':
        return []
    if not boolean(s['container_toolkit_accept_devices_as_volume_mounts'], strict=False):
        return [named + ' needs container_toolkit_accept_devices_as_volume_mounts=true, but it is false, so the runtime '
                'would ignore every allocation']
    if s['container_toolkit_runtime_mode'] == 'cdi':
        return [named + ' does not work with container_toolkit_runtime_mode=cdi: in cdi mode toolkit 1.17 reads only CDI '
                'names from device-list volume mounts; use mode auto or legacy']
    return []


def _cdi_strategy_problems(s, named):
    out = []
    if s['container_toolkit_runtime_mode'] != 'cdi':
        out.append(named + ' needs container_toolkit_runtime_mode=cdi (toolkit 1.17 ignores CDI annotations in mode %s)'
                   % s['container_toolkit_runtime_mode'])
    if not boolean(s['container_toolkit_cdi_enabled'], strict=False):
        out.append(named + ' needs container_toolkit_cdi_enabled=true (in cdi mode the plugin reaches its GPUs through '
                   'the toolkit\'s CDI spec)')
    if not boolean(s['containerd_nvidia_cdi_enabled'], strict=False):
        out.append(named + ' needs containerd_nvidia_cdi_enabled=true (containerd must pass the cdi.k8s.io/* annotations '
                   'or inject them)')
    return out


RULES = {
    'nvidia_driver': nvidia_driver,
    'container_toolkit': container_toolkit,
    'containerd_nvidia': containerd_nvidia,
    'gpu_node_join': gpu_node_join,
    'gpu_self_check': gpu_self_check,
    'mig_layout': mig_layout,
}
