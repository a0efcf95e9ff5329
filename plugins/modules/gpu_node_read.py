#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_node_read
short_description: Read, in one round trip, what the runtime and Kubernetes checks of a GPU node look at
version_added: 0.3.0
description:
  - Reads packages, files, sockets, a fixed set of command outputs (apt's policy, systemd units, containerd's version and
    configuration, nvidia-ctk's version), the kubelet's command line and configuration, and runs one container through
    containerd's nvidia handler, all in one module run, so that a layered check of a node costs one round trip for its
    runtime and Kubernetes layers instead of one per read.
  - It takes no command of the caller's choosing on the host; each read runs the one program it names, without a shell.
  - It only reads and reports; it judges nothing. The roles' C(check) entry points interpret what it returns.
  - Nothing is changed on the node; the container of O(container_run) is removed when it exits (C(ctr run --rm)).
author:
  - gpufleet maintainers (@gpufleet)
options:
  host_check:
    description:
      - Also gather the host layer and evaluate its checks exactly as M(gpufleet.node.nvidia_gpu_check) does with
        C(fail_on_error=false), in the same run. Its result is under RV(host).
      - When the host shows no GPU, the container of O(container_run) is not run.
    type: dict
    suboptions:
      host_root:
        description: As in M(gpufleet.node.nvidia_gpu_check).
        type: path
        default: /
      nvidia_smi_path:
        description: As in M(gpufleet.node.nvidia_gpu_check).
        type: path
      read_cuda_version:
        description: As in M(gpufleet.node.nvidia_gpu_check).
        type: bool
        default: false
      cuda_versions:
        description: As in M(gpufleet.node.nvidia_gpu_check).
        type: list
        elements: str
        default: []
      cuda_forward_compat:
        description: As in M(gpufleet.node.nvidia_gpu_check).
        type: bool
        default: false
  packages:
    description: Debian packages whose version and selection to read (one C(dpkg-query)).
    type: list
    elements: str
    default: []
  files:
    description: 'Files to read, as C({id: path}). A missing or unreadable file is reported, not failed.'
    type: dict
    default: {}
  stats:
    description: 'Paths to look up, as C({id: path}).'
    type: dict
    default: {}
  reads:
    description:
      - Reads that take no argument, each returned under RV(commands) by its name.
      - V(apt_lists) shows whether apt has package lists, with C(find /var/lib/apt/lists -maxdepth 1 -name *_Packages*
        -print -quit); its output is empty when there are none, as after an image build that emptied them.
      - V(dpkg_architecture) is C(dpkg --print-architecture); V(nvidia_ctk_version) is C(nvidia-ctk --version);
        V(containerd_version) is C(ctr version).
    type: list
    elements: str
    choices: [apt_lists, dpkg_architecture, nvidia_ctk_version, containerd_version]
    default: []
  mig_listing:
    description:
      - The nvidia-smi that lists the GPUs' MIG layout, returned under RV(commands) as C(mig_gpus) (C(nvidia-smi
        --query-gpu=index,name,pci.device_id,mig.mode.current,mig.mode.pending --format=csv,noheader)),
        C(mig_gpu_instances) (C(nvidia-smi mig -lgi)) and C(mig_compute_instances) (C(nvidia-smi mig -lci)), as the
        role gpufleet.node.mig_layout reads them. Not read when unset.
    type: str
  apt_policy:
    description: Packages whose apt policy to read (C(apt-cache policy), returned as C(commands.apt_policy)).
    type: list
    elements: str
    default: []
  services:
    description:
      - systemd units to read with C(systemctl show), returned as C(commands.services).
      - The properties read are C(Id), C(LoadState), C(UnitFileState), C(ActiveState) and C(SubState), one block per
        unit in the given order.
    type: list
    elements: str
    default: []
  containerd_config_dump:
    description:
      - containerd's configuration file to load with C(containerd --config <file> config dump), returned as
        C(commands.containerd_config_dump); an empty string loads containerd's default file.
      - Not read when not given.
    type: str
  kubelet_service:
    description:
      - systemd unit of the kubelet. When given, its main process's command line is read, and the file named by
        its C(--config) flag.
      - The cgroup driver is its C(--cgroup-driver) flag, else C(cgroupDriver) of that file, else empty.
    type: str
    default: ''
  containerd_check:
    description:
      - The containerd_nvidia role's configuration checker, run with C(/usr/bin/python3) after the kubelet was read.
      - C(--systemd-cgroup true) or C(false) is passed when the kubelet names a cgroup driver, so that the nvidia
        handler's C(SystemdCgroup) must match it.
    type: dict
    suboptions:
      checker:
        description: The checker the role installed (C(containerd-config-check.py)).
        type: path
        required: true
      config:
        description: containerd's configuration file.
        type: path
        required: true
      runtime_name:
        description: The nvidia runtime's name.
        type: str
        required: true
      binary_name:
        description: The runtime binary the handler must name.
        type: str
        required: true
      default_runtime:
        description: The default runtime's name the configuration must have.
        type: str
        required: true
      config_version:
        description: containerd's configuration version (2 or 3).
        type: int
        required: true
  container_run:
    description:
      - A container to run through the runtime of a containerd runtime handler, the way the CRI would.
      - The configuration is loaded with C(containerd --config <containerd_config> config dump); the handler's
        C(options.BinaryName) is taken from it. The container runs only when the handler names a binary and the
        image is in the namespace.
    type: dict
    suboptions:
      containerd_config:
        description: containerd's configuration file.
        type: path
        required: true
      handler:
        description: Runtime handler name, for example V(nvidia).
        type: str
        required: true
      image:
        description: Image reference in the namespace.
        type: str
        required: true
      name:
        description: Container id.
        type: str
        required: true
      namespace:
        description: containerd namespace.
        type: str
        default: k8s.io
      args:
        description: Options of C(ctr run) before the image, for example C(--env NVIDIA_VISIBLE_DEVICES=0).
        type: list
        elements: str
        default: []
      command:
        description: Command to run in the container.
        type: list
        elements: str
        required: true
  timeout:
    description: Seconds each command may run.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.node.read_only
'''

EXAMPLES = r'''
- name: Read what the runtime checks need
  gpufleet.node.gpu_node_read:
    packages: [nvidia-container-toolkit, containerd]
    reads: [containerd_version]
    services: [containerd]
    files:
      toolkit_config: /etc/nvidia-container-runtime/config.toml
    kubelet_service: kubelet
    container_run:
      containerd_config: /etc/containerd/config.toml
      handler: nvidia
      image: registry.example/cuda-base:12.2
      name: gpufleet-check
      args: [--env, NVIDIA_VISIBLE_DEVICES=0]
      command: [/usr/bin/nvidia-smi, -L]
'''

RETURN = r'''
host:
  description: C(checks), C(failed_checks), C(failed_layers) and C(nvidia_gpu), as M(gpufleet.node.nvidia_gpu_check) returns them.
  returned: when O(host_check) is given
  type: dict
packages:
  description: Per package name its C(version), C(want) (for example V(hold)) and C(status) (V(installed) when installed).
    Packages dpkg does not know are absent.
  returned: always
  type: dict
files:
  description:
    - Per id C(path), C(exists) and C(content) (text; empty when missing), C(error) when unreadable.
    - For a file that exists, also its C(mode) (four octal digits, for example V(0644)), C(owner) and C(group)
      (names, or the numeric id when it has no name), so that a caller can tell whether a file it would write is
      in place already.
  returned: always
  type: dict
stats:
  description:
    - Per id C(path), C(exists) and C(type) (V(file), V(directory), V(socket), V(other)).
    - For a path that exists, also its C(mode), C(owner) and C(group), as under RV(files).
  returned: always
  type: dict
commands:
  description:
    - Per read that ran, by its name (those of O(reads), and V(apt_policy), V(services), V(containerd_config_dump) and
      the three of O(mig_listing) when asked for), the command's C(cmd), C(rc), C(stdout), C(stderr), C(timed_out) and
      C(not_found).
  returned: always
  type: dict
kubelet:
  description: C(service), C(main_pid) (0 when not running), C(cmdline) (list), C(config_path), C(config) (text),
    C(cgroup_driver) and C(cgroup_driver_source).
  returned: when O(kubelet_service) is given
  type: dict
containerd_check:
  description: The checker's result as under RV(commands), with C(systemd_cgroup) (the value passed, or null).
  returned: when O(containerd_check) is given
  type: dict
container_run:
  description:
    - C(dump) (the C(config dump) command's result), C(binary) (the handler's BinaryName, empty when absent),
      C(image_present), C(ran), C(why), C(result) (the run's command result, or null) and C(attempts).
    - A run that succeeds with no output at all is run again, up to 3 times in all, since C(ctr) can lose the output
      of a container that exits at once; C(attempts) says how many runs it took (0 when none ran).
    - C(why) says why it did not run, V(gpus) (the host check shows none), V(image) or V(handler).
  returned: when O(container_run) is given
  type: dict
'''

import grp
import json
import os
import pwd
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils import _cuda
from ansible_collections.gpufleet.node.plugins.module_utils._cmdline import cmdline_flag
from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_health import Gatherer, host_report
from ansible_collections.gpufleet.node.plugins.module_utils._run import CommandRunner

DPKG_FORMAT = '${Package}\\t${Version}\\t${db:Status-Want}\\t${db:Status-Status}\\n'
PROC_ROOT = '/proc'


def read_packages(runner, names):
    if not names:
        return {}
    result = runner.run(['dpkg-query', '-W', '-f=' + DPKG_FORMAT] + list(names))
    packages = {}
    for line in result.stdout.splitlines():
        fields = line.split('\t')
        if len(fields) == 4 and fields[0]:
            packages[fields[0]] = {'version': fields[1], 'want': fields[2], 'status': fields[3]}
    return packages


def _name_of(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def read_file(path):
    entry = {'path': path, 'exists': os.path.isfile(path), 'content': ''}
    if entry['exists']:
        try:
            entry.update(_ownership(os.stat(path)))
            with open(path, 'rb') as handle:
                entry['content'] = handle.read().decode('utf-8', 'replace')
        except (IOError, OSError) as exc:
            entry['error'] = str(exc)
    return entry


def _ownership(status):
    return {'mode': '%04o' % stat.S_IMODE(status.st_mode),
            'owner': _name_of(pwd.getpwuid, status.st_uid), 'group': _name_of(grp.getgrgid, status.st_gid)}


def stat_path(path):
    try:
        status = os.stat(path)
    except OSError:
        return {'path': path, 'exists': False, 'type': ''}
    kinds = ((stat.S_ISSOCK, 'socket'), (stat.S_ISDIR, 'directory'), (stat.S_ISREG, 'file'))
    kind = next((name for test, name in kinds if test(status.st_mode)), 'other')
    return dict({'path': path, 'exists': True, 'type': kind}, **_ownership(status))


def config_cgroup_driver(text):
    """cgroupDriver of a KubeletConfiguration, in JSON or in YAML (read without a YAML library: one top-level key)."""
    try:
        config = json.loads(text)
    except ValueError:
        match = re.search(r'^cgroupDriver:\s*["\']?([A-Za-z0-9_-]+)', text, re.MULTILINE)
        return match.group(1) if match else ''
    return str(config.get('cgroupDriver') or '') if isinstance(config, dict) else ''


def read_kubelet(runner, service):
    shown = runner.run(['systemctl', 'show', '--property', 'MainPID', '--value', service])
    pid = int(shown.stdout.strip()) if shown.ok and shown.stdout.strip().isdigit() else 0
    kubelet = {'service': service, 'main_pid': pid, 'cmdline': [], 'config_path': '', 'config': '',
               'cgroup_driver': '', 'cgroup_driver_source': ''}
    if pid <= 0:
        return kubelet
    raw = read_file(os.path.join(PROC_ROOT, str(pid), 'cmdline'))['content']
    kubelet['cmdline'] = [arg for arg in raw.split('\0') if arg]
    kubelet['config_path'] = cmdline_flag(raw, 'config')
    if kubelet['config_path']:
        kubelet['config'] = read_file(kubelet['config_path'])['content']
    from_flag = cmdline_flag(raw, 'cgroup-driver')
    if from_flag:
        kubelet.update(cgroup_driver=from_flag, cgroup_driver_source='--cgroup-driver')
    elif config_cgroup_driver(kubelet['config']):
        kubelet.update(cgroup_driver=config_cgroup_driver(kubelet['config']),
                       cgroup_driver_source='cgroupDriver in ' + kubelet['config_path'])
    return kubelet


READS = {
    'apt_lists': ['find', '/var/lib/apt/lists', '-maxdepth', '1', '-name', '*_Packages*', '-print', '-quit'],
    'dpkg_architecture': ['dpkg', '--print-architecture'],
    'nvidia_ctk_version': ['nvidia-ctk', '--version'],
    'containerd_version': ['ctr', 'version'],
}
SERVICE_PROPERTIES = ['Id', 'LoadState', 'UnitFileState', 'ActiveState', 'SubState']
# What the role mig_layout reads (module_utils/_mig.py parses it).
MIG_LISTING = [
    ('mig_gpus', ['--query-gpu=index,name,pci.device_id,mig.mode.current,mig.mode.pending', '--format=csv,noheader']),
    ('mig_gpu_instances', ['mig', '-lgi']),
    ('mig_compute_instances', ['mig', '-lci']),
]


def read_commands(runner, params):
    """The fixed reads asked for, by name, in a fixed order."""
    argvs = [(name, READS[name]) for name in READS if name in params['reads']]
    if params['apt_policy']:
        argvs.append(('apt_policy', ['apt-cache', 'policy'] + list(params['apt_policy'])))
    if params['services']:
        properties = ['--property=' + name for name in SERVICE_PROPERTIES]
        argvs.append(('services', ['systemctl', 'show'] + properties + ['--'] + list(params['services'])))
    if params['containerd_config_dump'] is not None:
        config = ['--config', params['containerd_config_dump']] if params['containerd_config_dump'] else []
        argvs.append(('containerd_config_dump', ['containerd'] + config + ['config', 'dump']))
    if params['mig_listing']:
        argvs += [(name, [params['mig_listing']] + args) for name, args in MIG_LISTING]
    return dict((name, runner.run(argv).as_dict()) for name, argv in argvs)


def containerd_check_argv(spec):
    return ['/usr/bin/python3', spec['checker'], '--config', spec['config'], '--runtime-name', spec['runtime_name'],
            '--binary-name', spec['binary_name'], '--default-runtime', spec['default_runtime'],
            '--config-version', str(spec['config_version'])]


def run_containerd_check(runner, spec, kubelet):
    argv = containerd_check_argv(spec)
    systemd_cgroup = None
    if kubelet and kubelet['cgroup_driver']:
        systemd_cgroup = kubelet['cgroup_driver'] == 'systemd'
        argv = list(argv) + ['--systemd-cgroup', str(systemd_cgroup).lower()]
    result = runner.run(argv).as_dict()
    result['systemd_cgroup'] = systemd_cgroup
    return result


def handler_binary(dump_text, handler):
    """options.BinaryName of a runtime handler in a `containerd config dump` ('' when absent or unparsable)."""
    try:
        import tomllib
        loads = tomllib.loads
    except ImportError:  # Python < 3.11: Debian/Ubuntu package python3-toml, else no answer
        try:
            import toml
            loads = toml.loads
        except ImportError:
            return ''
    try:
        plugins = loads(dump_text).get('plugins', {})
    except Exception:  # pylint: disable=broad-except
        return ''
    for plugin in plugins.values():
        if not isinstance(plugin, dict):
            continue
        runtimes = (plugin.get('containerd') or {}).get('runtimes') or {}
        binary = ((runtimes.get(handler) or {}).get('options') or {}).get('BinaryName', '')
        if binary:
            return binary
    return ''


CONTAINER_ATTEMPTS = 3


def run_container(runner, spec, gpus_shown=True):
    dump = runner.run(['containerd', '--config', spec['containerd_config'], 'config', 'dump'])
    outcome = {'dump': dump.as_dict(), 'binary': handler_binary(dump.stdout, spec['handler']) if dump.ok else '',
               'image_present': False, 'ran': False, 'why': '', 'result': None, 'attempts': 0}
    listed = runner.run(['ctr', '--namespace', spec['namespace'], 'images', 'list', '--quiet', 'name==' + spec['image']])
    outcome['image_present'] = bool(listed.ok and listed.stdout.strip())
    if not gpus_shown:
        outcome['why'] = 'gpus'
    elif not outcome['image_present']:
        outcome['why'] = 'image'
    elif not outcome['binary']:
        outcome['why'] = 'handler'
    else:
        argv = (['ctr', '--namespace', spec['namespace'], 'run', '--rm', '--runc-binary', outcome['binary']]
                + list(spec['args']) + [spec['image'], spec['name']] + list(spec['command']))
        outcome['result'], outcome['attempts'] = run_for_output(runner, argv)
        outcome['ran'] = True
    return outcome


def run_for_output(runner, argv, attempts=CONTAINER_ATTEMPTS):
    """The run's result and how many runs it took.

    A container that exits at once can lose its output: when ctr deletes the task, the client cancels
    IO copying that is still opening its fifos (containerd client Task.Delete). A run that succeeded
    and printed nothing at all is run again; any output, or a failure, is the answer.
    """
    for attempt in range(1, attempts + 1):
        result = runner.run(argv)
        if not (result.ok and not result.output.strip()):
            break
    return result.as_dict(), attempt


def read_node(module):
    params = module.params
    runner = CommandRunner(module, timeout=params['timeout'])
    result = {
        'changed': False,
        'packages': read_packages(runner, params['packages']),
        'files': dict((key, read_file(path)) for key, path in params['files'].items()),
        'stats': dict((key, stat_path(path)) for key, path in params['stats'].items()),
        'commands': read_commands(runner, params),
    }
    if params['host_check']:
        check = params['host_check']
        facts = Gatherer(runner, host_root=check['host_root'], nvidia_smi_path=check['nvidia_smi_path'],
                         read_cuda=check['read_cuda_version'] or bool(check['cuda_versions'])).gather()
        result['host'] = host_report(facts, check)
    kubelet = read_kubelet(runner, params['kubelet_service']) if params['kubelet_service'] else None
    if kubelet is not None:
        result['kubelet'] = kubelet
    if params['containerd_check']:
        result['containerd_check'] = run_containerd_check(runner, params['containerd_check'], kubelet)
    if params['container_run']:
        gpus_shown = bool(result['host']['nvidia_gpu'].get('gpus')) if 'host' in result else True
        result['container_run'] = run_container(runner, params['container_run'], gpus_shown)
    return result


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            host_check=dict(type='dict', options=dict(
                host_root=dict(type='path', default='/'),
                nvidia_smi_path=dict(type='path'),
                read_cuda_version=dict(type='bool', default=False),
                cuda_versions=dict(type='list', elements='str', default=[]),
                cuda_forward_compat=dict(type='bool', default=False),
            )),
            packages=dict(type='list', elements='str', default=[]),
            files=dict(type='dict', default={}),
            stats=dict(type='dict', default={}),
            reads=dict(type='list', elements='str', default=[], choices=sorted(READS)),
            apt_policy=dict(type='list', elements='str', default=[]),
            mig_listing=dict(type='str'),
            services=dict(type='list', elements='str', default=[]),
            containerd_config_dump=dict(type='str'),
            kubelet_service=dict(type='str', default=''),
            containerd_check=dict(type='dict', options=dict(
                checker=dict(type='path', required=True),
                config=dict(type='path', required=True),
                runtime_name=dict(type='str', required=True),
                binary_name=dict(type='str', required=True),
                default_runtime=dict(type='str', required=True),
                config_version=dict(type='int', required=True),
            )),
            container_run=dict(type='dict', options=dict(
                containerd_config=dict(type='path', required=True),
                handler=dict(type='str', required=True),
                image=dict(type='str', required=True),
                name=dict(type='str', required=True),
                namespace=dict(type='str', default='k8s.io'),
                args=dict(type='list', elements='str', default=[]),
                command=dict(type='list', elements='str', required=True),
            )),
            timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    host_root = (module.params['host_check'] or {}).get('host_root')
    if host_root and not os.path.isdir(host_root):
        module.fail_json(msg='host_check.host_root is %r: it must be an existing directory (/ for this host)' % host_root)
    bad_cuda = _cuda.version_problems((module.params['host_check'] or {}).get('cuda_versions'), 'host_check.cuda_versions')
    if bad_cuda:
        module.fail_json(msg=bad_cuda)
    module.exit_json(**read_node(module))


def main():
    run_module()


if __name__ == '__main__':
    main()
