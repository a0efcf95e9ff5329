# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controls of the Kubernetes Pod Security Standards' baseline level, checked on a pod (private to gpufleet.node).

Pod Security admission (Kubernetes 1.23 and later) enforces them on a namespace labelled
``pod-security.kubernetes.io/enforce: baseline``; these checks say the same of a pod spec on any cluster."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

BASELINE_CAPABILITIES = frozenset((
    'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP',
    'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'))
SAFE_SYSCTLS = frozenset((
    'kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start',
    'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports',
    'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl',
    'net.ipv4.tcp_keepalive_probes'))
SELINUX_TYPES = frozenset(('', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'))
APPARMOR_TYPES = frozenset(('RuntimeDefault', 'Localhost'))
APPARMOR_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/'
CONTAINER_LISTS = ('containers', 'initContainers', 'ephemeralContainers')


def _containers(spec):
    """(field path, container) of every container of every kind."""
    for kind in CONTAINER_LISTS:
        for index, container in enumerate(spec.get(kind) or []):
            yield 'spec.%s[%d]' % (kind, index), container


def _context_problems(path, context):
    """The controls a pod's or a container's securityContext can break."""
    problems = []
    if (context.get('windowsOptions') or {}).get('hostProcess'):
        problems.append('%s.windowsOptions.hostProcess is true' % path)
    if (context.get('seccompProfile') or {}).get('type') == 'Unconfined':
        problems.append('%s.seccompProfile.type is Unconfined' % path)
    apparmor = (context.get('appArmorProfile') or {}).get('type')
    if apparmor is not None and apparmor not in APPARMOR_TYPES:
        problems.append('%s.appArmorProfile.type is %s' % (path, apparmor))
    selinux = context.get('seLinuxOptions') or {}
    if selinux.get('type', '') not in SELINUX_TYPES:
        problems.append('%s.seLinuxOptions.type is %s' % (path, selinux['type']))
    problems += ['%s.seLinuxOptions.%s is set' % (path, key) for key in ('user', 'role') if selinux.get(key)]
    return problems


def _container_problems(path, container):
    context = container.get('securityContext') or {}
    problems = _context_problems(path + '.securityContext', context)
    if context.get('privileged'):
        problems.append('%s.securityContext.privileged is true' % path)
    added = sorted(set((context.get('capabilities') or {}).get('add') or []) - BASELINE_CAPABILITIES)
    if added:
        problems.append('%s.securityContext.capabilities.add has %s' % (path, ', '.join(added)))
    if context.get('procMount', 'Default') != 'Default':
        problems.append('%s.securityContext.procMount is %s' % (path, context['procMount']))
    problems += ['%s.ports[%d].hostPort is %s' % (path, index, port['hostPort'])
                 for index, port in enumerate(container.get('ports') or []) if port.get('hostPort')]
    return problems


def _pod_level_problems(spec, annotations):
    problems = ['spec.%s is true' % field for field in ('hostNetwork', 'hostPID', 'hostIPC') if spec.get(field)]
    problems += ['spec.volumes[%d] (%s) is a hostPath volume' % (index, volume.get('name', '?'))
                 for index, volume in enumerate(spec.get('volumes') or []) if 'hostPath' in volume]
    context = spec.get('securityContext') or {}
    problems += _context_problems('spec.securityContext', context)
    problems += ['spec.securityContext.sysctls has %s' % sysctl.get('name')
                 for sysctl in context.get('sysctls') or [] if sysctl.get('name') not in SAFE_SYSCTLS]
    problems += ['metadata.annotations[%s%s] is %s' % (APPARMOR_ANNOTATION, key[len(APPARMOR_ANNOTATION):], value)
                 for key, value in sorted(annotations.items())
                 if key.startswith(APPARMOR_ANNOTATION) and value != 'runtime/default' and not value.startswith('localhost/')]
    return problems


def baseline_problems(pod):
    """What keeps a Pod (or a workload's pod template: metadata and spec) from the baseline level, one line per
    broken control naming the field; empty when the pod needs no more than baseline."""
    spec = pod.get('spec') or {}
    problems = _pod_level_problems(spec, (pod.get('metadata') or {}).get('annotations') or {})
    for path, container in _containers(spec):
        problems += _container_problems(path, container)
    return problems
