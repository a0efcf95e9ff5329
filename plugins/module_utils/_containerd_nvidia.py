# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The containerd_nvidia role's decisions (private to gpufleet.node): containerd's configuration the role writes, in
the drop-in layout or whole, and what preflight.yml's read of the host found in place, and so what configure.yml and
verify.yml have left to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import posixpath
import re

try:
    import tomllib
except ImportError:  # a controller before Python 3.11
    tomllib = None

from ansible.module_utils.six.moves.collections_abc import Mapping

from ansible_collections.gpufleet.node.plugins.module_utils._managed_files import TomlError, toml, toml_file
from ansible_collections.gpufleet.node.plugins.module_utils._node_state import (
    dirs_in_place, file_in_place, packages_at, systemctl_show,
)


# ----------------------------------------------------------------------------------------------- the configuration

WHOLE_FILE_MARK = 'written by the gpufleet.node.containerd_nvidia role'
DROP_IN_MARK = 'gpufleet.node.containerd_nvidia keeps'
_CDI_ANNOTATIONS = ['cdi.k8s.io/*']
_CDI_SPEC_DIRS = ['/etc/cdi', '/var/run/cdi']


def upstream_version(package_version):
    """(major, minor) of a containerd package version: (1, 6) for 1.6.20~ds1-1+deb12u3, (2, 1) for 2.1.9+ds1-5."""
    match = re.match(r'^(?:[0-9]+:)?([0-9]+)\.([0-9]+)', package_version or '')
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def plugin_names(config_version):
    """The CRI plugins of a config version: (the one holding the runtimes, the one holding images)."""
    if config_version >= 3:
        return 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images'
    return 'io.containerd.grpc.v1.cri', 'io.containerd.grpc.v1.cri'


def merged(base, over):
    """``over`` merged into ``base`` table by table, as Ansible's combine(recursive=true): lists are replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


def config_document(s, config_version):
    """What the role sets in containerd's configuration, in the layout of ``config_version`` (2 or 3), from the role's
    settings ``s`` (its variables without the ``containerd_nvidia_`` prefix). The runtimes and the default runtime are
    merged last, so no extra setting replaces them."""
    runtime_plugin, images_plugin = plugin_names(config_version)
    major, minor = upstream_version(s['version'])
    # containerd 1.7 and later inject CDI devices themselves (enable_cdi); 1.6 passes the device plugin's cdi.k8s.io/
    # annotations to the nvidia runtime, which injects them in its cdi mode.
    injects_cdi = (major, minor) >= (1, 7)
    nvidia = {'runtime_type': 'io.containerd.runc.v2',
              'privileged_without_host_devices': s['privileged_without_host_devices'],
              'options': merged(s['runc_options'], {'BinaryName': s['runtime_binary']})}
    if s['cdi_enabled'] and not injects_cdi:
        nvidia['container_annotations'] = list(_CDI_ANNOTATIONS)
    runtimes = merged(s['extra_runtimes'], {'runc': {'runtime_type': 'io.containerd.runc.v2', 'options': s['runc_options']},
                                            s['runtime_name']: nvidia})
    core = {'containerd': {'default_runtime_name': s['runtime_name'] if s['mode'] == 'default' else 'runc',
                           'runtimes': runtimes}}
    if s['cdi_enabled'] and injects_cdi:
        core.update({'enable_cdi': True, 'cdi_spec_dirs': list(_CDI_SPEC_DIRS)})
    document = merged(s['config_extra'], {'plugins': {runtime_plugin: dict(s['cri_settings'])}} if s['cri_settings'] else {})
    if s['sandbox_image']:
        sandbox = {'pinned_images': {'sandbox': s['sandbox_image']}} if config_version >= 3 else {'sandbox_image': s['sandbox_image']}
        document = merged(document, {'plugins': {images_plugin: sandbox}})
    if s['registry_config_path']:
        document = merged(document, {'plugins': {images_plugin: {'registry': {'config_path': s['registry_config_path']}}}})
    return merged(document, {'version': config_version, 'plugins': {runtime_plugin: core}})


def _parsed(text, path):
    if tomllib is None:
        return None, ['Reading %s needs Python 3.11 or later on the controller (tomllib).' % path]
    try:
        return tomllib.loads(text), []
    except tomllib.TOMLDecodeError as error:
        return None, ['%s is not valid TOML (%s): fix it, or set containerd_nvidia_config_layout: whole to have the role '
                      'write the whole file.' % (path, error)]


def _without_runtime(document, runtime_plugin, runtime_name):
    """``document`` without the runtime ``runtime_name`` (a copy; None when it had none)."""
    runtimes = ((document.get('plugins') or {}).get(runtime_plugin) or {}).get('containerd', {}).get('runtimes') or {}
    if runtime_name not in runtimes:
        return None
    out = copy.deepcopy(document)
    del out['plugins'][runtime_plugin]['containerd']['runtimes'][runtime_name]
    return out


def _site_main(text, wanted, pattern):
    """config.toml as the site keeps it, with what the drop-in layout needs: the import of the drop-in's directory and
    no runtime of the role's name. Returns (its document, its config version, its text to write or None when it stays
    as it is, problems)."""
    path, default_version = wanted['config_path'], wanted['config_version']
    if not text.strip() or WHOLE_FILE_MARK in text:
        # No file, or the one this role wrote whole before: a file that only imports the drop-ins.
        document = {'version': default_version, 'imports': [pattern]}
        return {}, default_version, toml_file(
            ['containerd configuration: the site keeps its settings here; %s the nvidia runtime in' % DROP_IN_MARK,
             '%s (imported below).' % wanted['dropin_path']], document), []
    document, problems = _parsed(text, path)
    if problems:
        return {}, default_version, None, problems
    version = document.get('version', 1)
    # containerd 2.x migrates a version 2 file, and merges files of one version; a version 1 file imports nothing.
    if version not in (2, default_version):
        return {}, default_version, None, [
            '%s is a config version %s file; containerd %s imports drop-ins only into version %s. Migrate it '
            '(containerd config migrate), or set containerd_nvidia_config_layout: whole.'
            % (path, version, wanted['version'], ' or '.join(str(v) for v in sorted({2, default_version})))]
    changed = _without_runtime(document, plugin_names(version)[0], wanted['settings']['runtime_name'])
    imports = document.get('imports') or []
    if pattern not in imports:
        changed = dict(changed or document, imports=list(imports) + [pattern])
    if changed is None:
        return document, version, None, []
    try:
        return document, version, toml(changed), []
    except TomlError as error:
        return document, version, None, ['%s needs the import of %s, and the role cannot write it back: %s. Add the '
                                         'import by hand.' % (path, pattern, error)]


def config_files(config_text, wanted):
    """The text of config.toml and of the role's drop-in (``dropin``; '' for none), and the problems that stop the role
    before any change, from config.toml as read (``config_text``) and ``wanted`` (``layout``, ``settings``,
    ``config_version``, ``config_path``, ``dropin_path``, ``version``, ``comments`` of a whole file).

    ``whole``: the role writes config.toml whole. ``drop-in`` (NVIDIA's layout since toolkit 1.18): the nvidia runtime
    and the role's settings go to the drop-in, which config.toml imports; config.toml keeps the site's settings. Before
    containerd 2.1 an imported plugin table replaces config.toml's whole (containerd issue 5837), so the drop-in starts
    each plugin table it sets from config.toml's."""
    if wanted['layout'] == 'whole':
        document = config_document(wanted['settings'], wanted['config_version'])
        return {'config': toml_file(wanted['comments'], document), 'dropin': '', 'problems': []}
    pattern = posixpath.join(posixpath.dirname(wanted['dropin_path']), '*.toml')
    site, version, main_text, problems = _site_main(config_text or '', wanted, pattern)
    document = config_document(wanted['settings'], version)
    if upstream_version(wanted['version']) < (2, 1):
        site = _without_runtime(site, plugin_names(version)[0], wanted['settings']['runtime_name']) or site
        document = merged(document, {'plugins': dict(
            (name, merged((site.get('plugins') or {}).get(name) or {}, table)) for name, table in document['plugins'].items())})
    comments = ['Managed by Ansible: changes made here are overwritten. Edit the role\'s variables, not this file.',
                '%s the nvidia runtime (mode %s) and its settings here,' % (DROP_IN_MARK, wanted['settings']['mode']),
                'imported by %s.' % wanted['config_path']]
    return {'config': config_text if main_text is None else main_text,
            'dropin': toml_file(comments, document), 'problems': problems}


def _files_in_place(files, dirs, wanted):
    checker = file_in_place(files.get('checker'), wanted['checker'], '0644')
    dropin = file_in_place(files.get('dropin'), wanted['dropin'], '0644')
    in_place = checker and 'checker_dir' in dirs and 'config_dir' in dirs and (
        not wanted['killmode_dropin'] or (dropin and 'dropin_dir' in dirs)) and (
        wanted['layout'] == 'whole' or 'config_dropin_dir' in dirs)
    return checker, dropin, in_place


def _config_in_place(files, wanted, installed):
    """(config.toml and the drop-in as the role writes them, both in place, an old drop-in of the role to remove)."""
    config = files.get('config') or {}
    written = config_files(config.get('content') if config.get('exists') else '', wanted)
    dropin = files.get('runtime_dropin') or {}
    stale = bool(not written['dropin'] and dropin.get('exists') and DROP_IN_MARK in (dropin.get('content') or ''))
    if wanted['layout'] == 'whole':
        in_place = file_in_place(config, written['config'], '0644') and not stale
    else:
        # config.toml is the site's: in place when the role leaves it as it is.
        in_place = bool(config.get('exists')) and config.get('content') == written['config'] and file_in_place(
            dropin, written['dropin'], '0644')
    return written, installed and in_place and not written['problems'], stale


def host_found(read, wanted):
    """What preflight.yml's read (a gpu_node_read result) found, judged against what the role installs and writes.

    ``wanted``: package and version (containerd's), os_packages (what the checker needs, any version), the text of
    the checker and dropin (KillMode) files, killmode_dropin (that drop-in is wanted), require_runtime_binary, and what
    config_files() takes. Each file, the configuration and the service count as in place only with containerd
    installed at its version then: an installation could replace them after the read. ``config`` and ``dropin``: the
    text of config.toml and of the role's containerd drop-in as the role writes them, ``config_problems`` what stops it,
    ``dropin_stale``: a drop-in of the role the whole layout removes. ``configured``: configure.yml has nothing to do.
    ``live_unchanged``: nothing this run does can change what containerd loads and runs, so verify.yml judges this read.
    """
    files, stats = read.get('files') or {}, read.get('stats') or {}
    packages = read.get('packages') or {}
    dirs = dirs_in_place(stats)
    installed = bool(packages_at(packages, {wanted['package']: wanted['version']}))
    checker, dropin, files_ok = _files_in_place(files, dirs, wanted)
    written, config, stale = _config_in_place(files, wanted, installed)
    units = systemctl_show(((read.get('commands') or {}).get('services') or {}).get('stdout'))
    service = units[0] if units else {}
    service_ok = installed and service.get('UnitFileState') == 'enabled' and service.get('ActiveState') == 'active'
    everything = files_ok and config and service_ok
    os_packages = wanted['os_packages']
    return {
        'installed': installed,
        'dirs_in_place': dirs,
        'checker_in_place': checker,
        'dropin_in_place': dropin,
        'files_in_place': files_ok,
        'config': written['config'],
        'dropin': written['dropin'],
        'config_problems': written['problems'],
        'dropin_stale': stale,
        'config_in_place': config,
        'service_in_place': service_ok,
        'configured': everything and bool(
            (stats.get('runtime_binary') or {}).get('exists') or not wanted['require_runtime_binary']),
        'live_unchanged': everything and len(packages_at(packages, dict((name, '') for name in os_packages))) == len(os_packages),
    }
