# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of playbooks/check.yml: one node's checks by layer, every node's entry in the report, and the fleet's
version drift."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.module_utils._run_summary import installed_packages

# From the host up: a failure in a lower layer explains the failures above it.
LAYERS = ('host', 'runtime', 'kubernetes')
STATUS_ORDER = ('pass', 'skip', 'warn', 'fail')
UNKNOWN = ''


def _worst(statuses):
    statuses = [status for status in statuses if status != 'skip'] or ['pass']
    return max(statuses, key=STATUS_ORDER.index)


def _layer_checks(name, checks):
    if not isinstance(checks, list):
        raise AnsibleFilterError('gpu_check_layers: the %s checks must be a list, got %r' % (name, checks))
    result = []
    for check in checks:
        status = check.get('status')
        if status not in STATUS_ORDER:
            raise AnsibleFilterError('gpu_check_layers: check %r of layer %s has status %r: expected one of %s'
                                     % (check.get('id'), name, status, ', '.join(STATUS_ORDER)))
        result.append({'id': check.get('id'), 'layer': name, 'part': check.get('part') or check.get('layer') or name,
                       'status': status, 'message': check.get('message', ''), 'remedy': check.get('remedy', '')})
    return result


def gpu_check_layers(host_checks, runtime_checks, kubernetes_checks):
    """A node's checks by layer, its status, and the first failing layer: where to start."""
    layers = []
    for name, checks in zip(LAYERS, (host_checks, runtime_checks, kubernetes_checks)):
        checks = _layer_checks(name, checks)
        layers.append({'name': name, 'status': _worst(check['status'] for check in checks), 'checks': checks})
    failing = [layer for layer in layers if layer['status'] == 'fail']
    start = failing[0] if failing else None
    return {
        'status': _worst(layer['status'] for layer in layers),
        'layers': layers,
        'failed_checks': [check['id'] for layer in layers for check in layer['checks'] if check['status'] == 'fail'],
        'first_failing_layer': start['name'] if start else None,
        'start_here': [{'id': check['id'], 'message': check['message'], 'remedy': check['remedy']}
                       for check in start['checks'] if check['status'] == 'fail'] if start else [],
    }


def _majority(values):
    """The value most nodes have; on a tie the one sorted first, so the choice is stable."""
    counts = Counter(values)
    top = max(counts.values())
    return sorted(value for value, count in counts.items() if count == top)[0]


def gpu_fleet_drift(nodes, fields):
    """Per group and field, the majority value and the nodes that differ; rows with the failed cells first.

    ``nodes``: [{host, group, values: {field: value}}]; a missing value counts as its own value ('')."""
    if not isinstance(nodes, list) or not isinstance(fields, list):
        raise AnsibleFilterError('gpu_fleet_drift: expected a list of nodes and a list of fields')
    groups = {}
    for node in nodes:
        groups.setdefault(node.get('group') or 'all', []).append(node)
    drift, odd_cells = [], set()
    for group in sorted(groups):
        for field in fields:
            values = {node['host']: str(node.get('values', {}).get(field) or UNKNOWN) for node in groups[group]}
            majority = _majority(list(values.values()))
            odd = [{'host': host, 'value': value} for host, value in sorted(values.items()) if value != majority]
            if odd:
                drift.append({'group': group, 'field': field, 'majority': majority, 'odd': odd})
                odd_cells.update((entry['host'], field) for entry in odd)
    rows = []
    for node in nodes:
        cells = [{'field': field, 'value': str(node.get('values', {}).get(field) or UNKNOWN),
                  'status': 'fail' if (node['host'], field) in odd_cells else 'pass'} for field in fields]
        rows.append({'host': node['host'], 'group': node.get('group') or 'all', 'status': node.get('status', 'pass'),
                     'drift': any(cell['status'] == 'fail' for cell in cells), 'cells': cells})
    rows.sort(key=lambda row: (not row['drift'], row['status'] != 'fail', row['host']))
    return {'fields': list(fields), 'drift': drift, 'rows': rows}


def _unreadable_host(read):
    return [{'id': 'host_readable', 'layer': 'host', 'status': 'fail',
             'message': 'gpu_node_read could not read the host: %s' % read.get('msg', 'no result'),
             'remedy': 'check that the node answers over Ansible\'s connection and has Python 3'}]


def _unchecked(name):
    return {'status': 'fail', 'layers': [], 'failed_checks': ['unreachable'], 'first_failing_layer': 'host',
            'start_here': [{'id': 'unreachable', 'message': name + ' could not be checked',
                            'remedy': 'check that the node answers over Ansible\'s connection'}]}


def _observed_versions(read, images):
    """The versions check.yml compares across the fleet, as the node read found them (never the inventory's pins)."""
    observed = (read.get('host') or {}).get('nvidia_gpu') or {}
    driver = observed.get('driver') or {}
    packages = installed_packages(read.get('packages'))
    return {
        'driver_running': driver.get('kernel_module_version') or '',
        'driver_userspace': driver.get('userspace_version') or '',
        'driver_cuda': driver.get('cuda_version') or '',
        'driver_package': packages.get('libnvidia-ml1', ''),
        'toolkit': packages.get('nvidia-container-toolkit', ''),
        'containerd': packages.get('containerd', ''),
        'kernel': (observed.get('kernel') or {}).get('release') or '',
        'device_plugin': (images or [''])[0],
    }


def check_report_nodes(names, hostvars):
    """One entry per node of a check.yml run: its checks in layers (gpu_check_layers) and the versions observed on it.

    A node whose roles recorded no checks (its read never ran) fails as unreachable; one the read could not read
    fails its host layer."""
    nodes = []
    for name in names:
        host = hostvars[name]
        read = host.get('check_node_read') or {}
        if 'gpu_node_join_checks' in host:
            host_checks = ((read.get('host') or {}).get('checks') or _unreadable_host(read)) + (host.get('mig_layout_checks') or [])
            result = gpu_check_layers(host_checks, host['container_toolkit_checks'] + host['containerd_nvidia_checks']
                                      + host['gpu_node_join_runtime_checks'], host['gpu_node_join_checks'])
        else:
            result = _unchecked(name)
        nodes.append({
            'host': name,
            'group': host.get('check_drift_group', 'gpu_nodes'),
            'status': result['status'],
            'first_failing_layer': result['first_failing_layer'],
            'start_here': result['start_here'],
            'failed_checks': result['failed_checks'],
            'critical_xids': [check['message'] for layer in result['layers'] for check in layer['checks']
                              if check['id'] == 'critical_xids_absent' and check['status'] == 'fail'],
            'layers': result['layers'],
            'values': _observed_versions(read, host.get('gpu_node_join_device_plugin_images')),
        })
    return nodes


class FilterModule(object):
    def filters(self):
        return {'gpu_check_layers': gpu_check_layers, 'gpu_fleet_drift': gpu_fleet_drift, 'check_report_nodes': check_report_nodes}
