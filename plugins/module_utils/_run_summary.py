# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rows of onboard.yml's and upgrade_driver.yml's summaries (private to gpufleet.node): one per node of the run,
from what was observed on the node and in the API, never from the inventory's pins; and the text of their reports
(the Markdown, the failure message) from those rows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.node.plugins.module_utils._report_text import joined as _joined, printed as _printed

DEFAULT_KUBECONFIG = '~/.kube/config'
DEFAULT_API_HOST = 'localhost'
# The labels of a Node the onboarding summary shows.
SUMMARY_LABELS = re.compile('(node-role.kubernetes.io/gpu|gpu-tier|gpufleet.io/)')
UPGRADE_REMEDIES = {
    'cordon-required': 'check the API server access and the Node object, then re-run',
    'pod-deletion-required': 'the GPU pods did not leave within upgrade_driver_pod_deletion_timeout: free the budget named (or '
                             'set upgrade_driver_gpu_pod_removal=delete), or look at their finalizers and grace periods, then '
                             're-run',
    'drain-required': 'free what blocks the drain (the budget or pods named), then re-run: the node starts again from the cordon',
    'driver-upgrade-required': 'the driver may have changed in part: the reason says what failed, what was put back (pins, '
                               'holds) and what dpkg or the module reload left undone; the device plugin stays paused: fix the '
                               'cause (the package source, a package script, what holds the module), then re-run',
    'mig-layout-required': 'the GPUs\' MIG layout may have changed in part (the reason names the GPU and what nvidia-smi '
                           'refused, or the MIG mode that waits for a GPU reset); the device plugin stays paused: free the '
                           'GPUs (stop what holds them, or reset or reboot for a pending MIG mode), then re-run',
    'validation-required': 'the node does not serve its GPUs with the new driver (the failing layer is named): fix it, then re-run',
    'uncordon-required': 'uncordon the node (kubectl uncordon) or re-run',
}
OUTCOME_REMEDIES = {
    'deferred': 're-run in the next window',
    'blocked': 're-run once the nodes named are back in service, or raise upgrade_driver_max_unavailable',
    'not started': 're-run once the failed node is fixed',
    'lost': 'bring the host back and look at it first (dpkg --audit, the loaded module, check.yml): the run lost it in '
            'this step, and it stays cordoned, the device plugin paused if the step was the driver\'s. Then re-run: the '
            'rollout resumes at this node',
}
# When the API server stopped answering mid-change, the Node keeps the last state the run wrote.
API_REMEDY = ('bring the API server back, then re-run: the rollout resumes at this node, which stays cordoned with the last '
              'state the run could write')


def _mapping(value):
    return value if isinstance(value, dict) else {}


def _node_name(host, name):
    return host.get('gpu_node_join_node_name', name)


def summary_clusters(names, hostvars):
    """The run's hosts by the cluster that knows their Node, for one API read per cluster:
    [{kubeconfig, api_host, nodes}] in the run's order."""
    clusters = {}
    for name in names:
        host = hostvars[name]
        kubeconfig = host.get('gpu_node_join_kubeconfig', DEFAULT_KUBECONFIG)
        api_host = host.get('gpu_node_join_api_host', DEFAULT_API_HOST)
        cluster = clusters.setdefault((kubeconfig, api_host), {'kubeconfig': kubeconfig, 'api_host': api_host, 'nodes': []})
        cluster['nodes'].append(_node_name(host, name))
    return list(clusters.values())


def _read_nodes(node_reads):
    return [node for result in _mapping(node_reads).get('results') or [] for node in _mapping(result).get('nodes') or []]


def _unread_nodes(node_reads):
    """{node name: the API's error} for the Nodes of the reads that returned no nodes (registered with
    failed_when false, a failed read is told by what it lacks, not by its failed flag)."""
    return dict((name, str(_mapping(result).get('msg') or 'no answer'))
                for result in _mapping(node_reads).get('results') or [] if 'nodes' not in _mapping(result)
                for name in _mapping(_mapping(result).get('item')).get('nodes') or [])


def _node_named(nodes, name):
    return next((node for node in nodes if _mapping(node.get('metadata')).get('name') == name), {})


def installed_packages(packages):
    """{name: version} of the packages of a node read that dpkg has fully installed."""
    return dict((name, package.get('version')) for name, package in _mapping(packages).items()
                if package.get('status') == 'installed')


def _runtime_mode(dump):
    """How containerd's loaded configuration reaches the nvidia runtime: default, runtimeclass, 'no nvidia handler',
    or '' when there was no dump."""
    default_runtime = re.search(r'default_runtime_name\s*=\s*"([^"]*)"', dump)
    if default_runtime and default_runtime.group(1) == 'nvidia':
        return 'default'
    if re.search(r'\.runtimes\.["\']?nvidia["\']?\]', dump):
        return 'runtimeclass'
    return 'no nvidia handler' if dump else ''


def _onboard_row(name, host, node):
    observed_node = host.get('onboard_observed') or {}
    observed = _mapping(_mapping(observed_node.get('host')).get('nvidia_gpu'))
    driver = _mapping(observed.get('driver'))
    gpus = observed.get('gpus') or []
    packages = installed_packages(observed_node.get('packages'))
    dump = _mapping(_mapping(observed_node.get('commands')).get('containerd_config_dump')).get('stdout') or ''
    metadata = _mapping(node.get('metadata'))
    return {
        'node': name,
        'result': 'onboarded' if host.get('onboard_done', False) else 'failed',
        'error': host.get('onboard_error', ''),
        'gpu_model': (gpus[0] if gpus else {}).get('name', ''),
        'gpu_count': len(gpus),
        'driver': driver.get('kernel_module_version') or '',
        'driver_userspace': driver.get('userspace_version') or '',
        'toolkit': packages.get('nvidia-container-toolkit', ''),
        'containerd': packages.get('containerd', ''),
        'runtime_mode': _runtime_mode(dump),
        'labels': dict((key, value) for key, value in _mapping(metadata.get('labels')).items() if SUMMARY_LABELS.match(key)),
        'taints': [taint.get('key') for taint in _mapping(node.get('spec')).get('taints') or []],
        'allocatable_gpu': _mapping(_mapping(node.get('status')).get('allocatable')).get('nvidia.com/gpu', '0'),
        'smoke_test_passed': _mapping(metadata.get('annotations')).get('gpufleet.io/smoke-test-passed', ''),
    }


def onboard_rows(names, hostvars, node_reads):
    """onboard.yml's summary: one row per host of the run, from what the run observed on it (onboard_observed) and its
    Node in ``node_reads`` (a registered loop of gpufleet.node.gpu_cluster_read)."""
    nodes = _read_nodes(node_reads)
    return [_onboard_row(name, hostvars[name], _node_named(nodes, _node_name(hostvars[name], name))) for name in names]


def _upgrade_outcome(name, result, planned, stopped):
    if 'result' in result:
        return result['result']
    if name not in planned:
        return 'up to date'
    if re.search('^the batch would make', stopped):
        return 'blocked'
    if re.search('window', stopped):
        return 'deferred'
    return 'not started'


def _step_times(steps):
    """Each step's seconds (to the next step's start) and the whole run's."""
    times = [{'step': step['step'], 'seconds': round(following['at'] - step['at'], 1)}
             for step, following in zip(steps, steps[1:])]
    return times, round(steps[-1]['at'] - steps[0]['at'], 1) if len(steps) > 1 else 0


def _upgrade_remedy(outcome, result):
    remedy = UPGRADE_REMEDIES.get(result.get('step'), '') if outcome == 'failed' else OUTCOME_REMEDIES.get(outcome, '')
    if result.get('api_error'):
        return API_REMEDY if outcome == 'failed' else '%s; %s' % (API_REMEDY, remedy)
    return remedy


def _upgrade_row(name, host, node, planned, stopped, node_error=''):
    upgrade = host.get('__upgrade') or {}
    upgrade_from = host.get('__upgrade_from') or {}
    labels = _mapping(_mapping(node.get('metadata')).get('labels'))
    after = _mapping(_mapping(_mapping(host.get('__upgrade_after')).get('nvidia_gpu')).get('driver'))
    result = host.get('__upgrade_result') or {}
    outcome = _upgrade_outcome(name, result, planned, stopped)
    times, seconds = _step_times(host.get('__upgrade_steps') or [])
    return {
        'node': upgrade.get('node', name),
        'result': outcome,
        'target': upgrade.get('target', ''),
        'before': {'running': upgrade_from.get('running', ''), 'installed': upgrade_from.get('installed', '')},
        'after': {'running': after.get('kernel_module_version') or '', 'userspace': after.get('userspace_version') or ''},
        'state': labels.get('gpufleet.io/driver-upgrade-state', ''),
        'driver_label': labels.get('gpufleet.io/nvidia-driver', ''),
        'cordoned': None if node_error else _mapping(node.get('spec')).get('unschedulable', False) if node else False,
        'node_read_error': node_error,
        'plugin_paused': labels.get('gpufleet.io/device-plugin', '') == 'paused-for-driver-upgrade',
        'step': result.get('step', ''),
        'reason': result.get('reason', '') or (stopped if outcome in ('blocked', 'deferred', 'not started') else ''),
        'remedy': _upgrade_remedy(outcome, result),
        'steps': times,
        'seconds': seconds,
        'mig_before': upgrade_from.get('mig') or {},
        'mig_after': _mapping(host.get('__mig_layout')).get('observed') or {},
    }


def upgrade_rows(names, hostvars, plan, node_reads):
    """upgrade_driver.yml's summary: one row per host of the run, with the driver before (from the plan) and after (read
    on the node now), the outcome, the step and reason of a failure with its remedy, and the time of each step.

    ``plan``: the plan's host (gpufleet_upgrade_batches, gpufleet_upgrade_stopped); ``node_reads``: a registered loop
    of gpufleet.node.gpu_cluster_read. A Node whose read failed has no state, C(cordoned) None and the API's error in
    C(node_read_error)."""
    plan = plan or {}
    planned = [host for batch in plan.get('gpufleet_upgrade_batches') or [] for host in batch]
    stopped = plan.get('gpufleet_upgrade_stopped') or ''
    nodes = _read_nodes(node_reads)
    unread = _unread_nodes(node_reads)
    rows = []
    for name in names:
        host = hostvars[name]
        node_name = (host.get('__upgrade') or {}).get('node', name)
        rows.append(_upgrade_row(name, host, _node_named(nodes, node_name), planned, stopped, unread.get(node_name, '')))
    return rows


# --------------------------------------------------------------------------- the reports' text

ONBOARD_COLUMNS = ('node', 'result', 'GPU', 'count', 'driver (kernel module / user space)', 'toolkit', 'containerd', 'runtime',
                   'allocatable nvidia.com/gpu', 'last smoke test passed (device, time)', 'taints', 'labels')
UPGRADE_COLUMNS = ('node', 'result', 'before (running / installed)', 'after (running / user space)', 'state', 'cordoned',
                   'seconds', 'failure')
# The results that fail upgrade_driver.yml's run.
UPGRADE_FAILURES = ('failed', 'lost', 'blocked')


def _or_dash(value):
    return _printed(value or '-')


def _table_row(cells):
    return '| %s |\n' % ' | '.join(_printed(cell) for cell in cells)


def _table(columns, rows):
    """A Markdown table: its header, the separator line, and one line per row of cells."""
    return _table_row(columns) + '|' + '---|' * len(columns) + '\n' + ''.join(_table_row(cells) for cells in rows)


def _onboard_cells(row):
    return [row['node'], row['result'], row['gpu_model'], row['gpu_count'],
            '%s / %s' % (_or_dash(row['driver']), _or_dash(row['driver_userspace'])), row['toolkit'], row['containerd'],
            row['runtime_mode'], row['allocatable_gpu'], _or_dash(row['smoke_test_passed']), _joined(row['taints']),
            _joined(_joined(label, '=') for label in row['labels'].items())]


def _onboard_failure(row):
    return '- **%s**: %s\n' % (_printed(row['node']), str(row['error']).replace('\n', ' '))


def onboard_summary_markdown(rows):
    """onboard.yml's report (onboard-summary.md) from its rows (onboard_rows): the table, then each failure."""
    text = '# GPU node onboarding summary\n\n' + _table(ONBOARD_COLUMNS, [_onboard_cells(row) for row in rows])
    failed = [row for row in rows if row['error']]
    if failed:
        text += '\n## Failures\n\n' + ''.join(_onboard_failure(row) for row in failed)
    return text


def _upgrade_failure_cell(row):
    # A pipe or a line break in the reason (an API's message) or the remedy would break the table's row.
    remedy = (' Remedy: %s' % (row['remedy'],)) if row['remedy'] else ''
    cell = ('%s: ' % (row['step'],) if row['step'] else '') + str(row['reason']) + remedy
    return cell.replace('|', '/').replace('\n', ' ')


def _upgrade_cells(row):
    return [row['node'], row['result'],
            '%s / %s' % (_or_dash(row['before']['running']), _or_dash(row['before']['installed'])),
            '%s / %s' % (_or_dash(row['after']['running']), _or_dash(row['after']['userspace'])),
            'not read' if row.get('node_read_error') else _or_dash(row['state']), _cordoned_cell(row['cordoned']),
            row['seconds'], _upgrade_failure_cell(row)]


def _cordoned_cell(cordoned):
    return 'unknown' if cordoned is None else 'yes' if cordoned else 'no'


def _step_seconds(row):
    return ', '.join('%s %s' % (_printed(step['step']), _printed(step['seconds'])) for step in row['steps'])


def _layout(layout):
    return '; '.join('GPU %s %s' % (index, layout[index]) for index in sorted(layout, key=int)) or '-'


def upgrade_summary_markdown(rows):
    """upgrade_driver.yml's report (upgrade-driver-summary.md) from its rows (upgrade_rows): the table (with the MIG
    layout before and after when a node has one), then the seconds of each step of the nodes that took any."""
    if any(row.get('mig_before') or row.get('mig_after') for row in rows):
        table = _table(UPGRADE_COLUMNS + ('MIG layout before', 'MIG layout after'),
                       [_upgrade_cells(row) + [_layout(row['mig_before']), _layout(row['mig_after'])] for row in rows])
    else:
        table = _table(UPGRADE_COLUMNS, [_upgrade_cells(row) for row in rows])
    text = '# NVIDIA driver rollout\n\n' + table
    timed = [row for row in rows if row['steps']]
    if timed:
        text += '\n## Time per step (seconds)\n\n' + _table(('node', 'steps'), [(row['node'], _step_seconds(row)) for row in timed])
    return text


def _upgrade_failure(row):
    step = ('at %s: ' % (row['step'],)) if row['step'] else ''
    remedy = (' Remedy: %s' % (row['remedy'],)) if row['remedy'] else ''
    return '%s: %s %s%s%s ' % (_printed(row['node']), _printed(row['result']), step, _printed(row['reason']), remedy)


def upgrade_summary_failing(rows):
    """The rows whose result fails upgrade_driver.yml's run (UPGRADE_FAILURES)."""
    return [row for row in rows if row['result'] in UPGRADE_FAILURES]


def upgrade_summary_failure(rows, report_dir):
    """Why upgrade_driver.yml fails: each failed, lost or blocked node with its step, reason and remedy, then where the
    report is."""
    failures = ''.join(_upgrade_failure(row) for row in upgrade_summary_failing(rows))
    return ('%sReport: %s/upgrade-driver-summary.md' % (failures, _printed(report_dir))).strip()
