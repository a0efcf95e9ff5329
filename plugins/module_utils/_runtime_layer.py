# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The runtime layer's checks of the container_toolkit and containerd_nvidia roles (private to gpufleet.node): from
what playbooks/check.yml read on a node (a gpufleet.node.gpu_node_read result) and the role's settings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# The toolkit's settings check.yml compares, with NVIDIA's defaults for a key the file does not set.
TOOLKIT_SETTINGS = (
    ('accept-nvidia-visible-devices-envvar-when-unprivileged', None, True),
    ('accept-nvidia-visible-devices-as-volume-mounts', None, False),
    ('nvidia-container-runtime.mode', 'nvidia-container-runtime', 'auto'),
)


def _check(check_id, part, ok, message, remedy):
    return {'id': check_id, 'layer': 'runtime', 'part': part, 'status': 'pass' if ok else 'fail', 'message': message,
            'remedy': '' if ok else remedy}


def _package_problems(found, names, version):
    wrong = []
    for name in names:
        package = found.get(name) or {}
        if package.get('status') != 'installed':
            wrong.append(name + ' is not installed')
        elif package.get('version') != version:
            wrong.append('%s is %s' % (name, package.get('version')))
        elif package.get('want') != 'hold':
            wrong.append('%s %s is not held' % (name, package.get('version')))
    return wrong


def _toolkit_observed(text, parse):
    live = parse(text)
    observed = {}
    for key, table, default in TOOLKIT_SETTINGS:
        values = live.get(table) or {} if table else live
        observed[key] = values.get(key.rsplit('.', 1)[-1], default)
    return observed


def toolkit_checks(read, settings, parse_toml):
    """C(toolkit_packages): the toolkit's packages are installed at the role's version and held; C(toolkit_config): its
    config.toml is there and its device-list settings and runtime mode are the role's.

    ``settings``: version, packages, config_path, accept_envvar_when_unprivileged, accept_devices_as_volume_mounts,
    runtime_mode. ``parse_toml``: the TOML parser (text to dict)."""
    version = settings['version']
    remedy = 'run gpufleet.node.container_toolkit (container_toolkit_version=%s)' % version
    wrong = _package_problems(read.get('packages') or {}, settings['packages'], version)
    checks = [_check('toolkit_packages', 'container_toolkit', not wrong,
                     ('%s, expected %s held' % ('; '.join(wrong), version)) if wrong
                     else 'the toolkit packages are %s, held' % version, remedy)]
    path = settings['config_path']
    config = (read.get('files') or {}).get('container_toolkit_config') or {}
    if not config.get('exists'):
        checks.append(_check('toolkit_config', 'container_toolkit', False,
                             path + ' is missing: the nvidia runtime cannot start containers', remedy))
        return checks
    observed = _toolkit_observed(config.get('content') or '', parse_toml)
    intended = dict(zip([key for key, _table, _default in TOOLKIT_SETTINGS],
                        [bool(settings['accept_envvar_when_unprivileged']), bool(settings['accept_devices_as_volume_mounts']),
                         settings['runtime_mode']]))
    differ = ['%s = %s (intended %s)' % (key, json.dumps(observed[key]), json.dumps(value))
              for key, value in intended.items() if observed[key] != value]
    checks.append(_check(
        'toolkit_config', 'container_toolkit', not differ,
        ('%s differs from the role settings: %s' % (path, ', '.join(differ))) if differ
        else '%s: mode %s, envvar when unprivileged %s, devices as volume mounts %s' % (
            path, observed['nvidia-container-runtime.mode'],
            json.dumps(observed['accept-nvidia-visible-devices-envvar-when-unprivileged']),
            json.dumps(observed['accept-nvidia-visible-devices-as-volume-mounts'])),
        remedy))
    return checks


def _server_version(output):
    """The server's version in `ctr version` output, without a leading v; '' when containerd did not answer."""
    match = re.search(r'Server:[\s\S]*?Version:\s+v?(\S+)', output or '')
    return match.group(1) if match else ''


def _handler_check(run, settings, remedy):
    said = (run.get('stderr') or run.get('stdout') or run.get('msg') or '').strip()
    rc = run.get('rc', -1)
    if rc == 0:
        cgroup = settings.get('kubelet_cgroup_driver') or ''
        return _check('containerd_nvidia_handler', 'containerd_nvidia', True, 'containerd loads %s with the %s handler (%s), '
                      'default runtime %s%s' % (settings['config_path'], settings['runtime_name'], settings['runtime_binary'],
                                                settings['default_runtime'],
                                                (', SystemdCgroup matching the kubelet\'s cgroup driver ' + cgroup) if cgroup else ''),
                      '')
    if rc == 1:
        return _check('containerd_nvidia_handler', 'containerd_nvidia', False, said, remedy)
    return _check('containerd_nvidia_handler', 'containerd_nvidia', False,
                  'containerd cannot load %s with its nvidia runtime check: %s' % (settings['config_path'], said),
                  remedy + '; `containerd config dump` shows what containerd makes of the file')


def containerd_checks(read, settings):
    """C(containerd_nvidia_handler): containerd loads its configuration with the nvidia handler (the role's checker's
    verdict, read as C(containerd_check)); C(containerd_version): the containerd that answers is the role's upstream
    version.

    ``settings``: mode, version (the package's), upstream (its upstream version), config_path, runtime_name,
    runtime_binary, default_runtime. The kubelet's cgroup driver is the node read's."""
    remedy = 'run gpufleet.node.containerd_nvidia (containerd_nvidia_mode=%s)' % settings['mode']
    version_read = (read.get('commands') or {}).get('containerd_version') or {}
    server = _server_version(version_read.get('stdout'))
    upstream = settings['upstream']
    ok = bool(server) and re.sub(r'[~+-].*$', '', server) == upstream
    if server:
        message = 'containerd %s answers' % server
    else:
        message = 'containerd does not answer: ' + (version_read.get('stderr', read.get('msg', '')) or '').strip()
    if not ok:
        message += ', expected %s (containerd_nvidia_version %s)' % (upstream, settings['version'])
    settings = dict(settings, kubelet_cgroup_driver=(read.get('kubelet') or {}).get('cgroup_driver') or '')
    return [_handler_check(read.get('containerd_check') or {}, settings, remedy),
            _check('containerd_version', 'containerd_nvidia', ok, message,
                   remedy if server else 'start containerd; `systemctl status containerd` and its journal say why it is not running')]
