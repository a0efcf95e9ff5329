# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of playbooks/check.yml: one node's checks by layer, and the fleet's version drift."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter

from ansible.errors import AnsibleFilterError

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


class FilterModule(object):
    def filters(self):
        return {'gpu_check_layers': gpu_check_layers, 'gpu_fleet_drift': gpu_fleet_drift}
