# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU utilisation and waste report (private to gpufleet.node): what the fleet's GPUs did over a window, from the
dcgm-exporter metrics Prometheus keeps, joined with the API's GPU allocations.

dcgm-exporter reports one series per GPU (labels ``Hostname`` and ``UUID``) and, with its Kubernetes mapping on, the
``namespace`` and ``pod`` the GPU is allocated to. A series without a pod is a GPU no pod held. Compute is
``DCGM_FI_DEV_GPU_UTIL`` (percent); memory is ``DCGM_FI_DEV_FB_USED`` over ``FB_USED + FB_FREE`` (MiB, their sum is
the GPU's memory). Missing data is never read as idle: a source with no series fails the report, and a pod that holds
GPUs without a series is listed as without data."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

GPU_RESOURCES = ('nvidia.com/gpu', 'nvidia.com/gpu.shared')
MIG_RESOURCE_PREFIX = 'nvidia.com/mig-'
HOURLY = 'hourly_util'


def queries(window_hours):
    """The PromQL of each source, over the last ``window_hours`` (instant queries; HOURLY is a range query, step 1h)."""
    window = '%dh' % int(window_hours)
    return {
        'util_mean': 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[%s])' % window,
        'util_p95': 'quantile_over_time(0.95, DCGM_FI_DEV_GPU_UTIL[%s])' % window,
        'fb_used_mean': 'avg_over_time(DCGM_FI_DEV_FB_USED[%s])' % window,
        'fb_used_p95': 'quantile_over_time(0.95, DCGM_FI_DEV_FB_USED[%s])' % window,
        'fb_free_mean': 'avg_over_time(DCGM_FI_DEV_FB_FREE[%s])' % window,
        HOURLY: 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h])',
    }


# --------------------------------------------------------------------------- reading Prometheus's answers


def _key(metric):
    return (metric.get('Hostname', ''), metric.get('UUID', ''), metric.get('namespace', ''), metric.get('pod', ''))


def _source_problem(name, query, answer):
    if not isinstance(answer, dict) or answer.get('status') != 'success':
        error = answer.get('error') if isinstance(answer, dict) else answer
        return '%s (%s): Prometheus did not answer: %s' % (name, query, error or 'no answer')
    if not (answer.get('data') or {}).get('result'):
        return ('%s (%s): Prometheus returned no series; is dcgm-exporter scraped, with its Kubernetes mapping, and does '
                'the window hold data?' % (name, query))
    return ''


def _values(answer):
    """{series key: value} of an instant vector answer."""
    return dict((_key(item['metric']), float(item['value'][1])) for item in answer['data']['result'])


def _hourly(answer):
    """{series key: [(timestamp, value)]} of a range (matrix) answer."""
    return dict((_key(item['metric']), [(float(t), float(v)) for t, v in item['values']]) for item in answer['data']['result'])


def _series(answers):
    values = dict((name, _values(answer)) for name, answer in answers.items() if name != HOURLY)
    hourly = _hourly(answers[HOURLY])
    series = []
    for key, util_mean in sorted(values['util_mean'].items()):
        used, free = values['fb_used_mean'].get(key), values['fb_free_mean'].get(key)
        total = (used or 0) + (free or 0)
        used_p95 = values['fb_used_p95'].get(key)
        series.append({
            'node': key[0], 'uuid': key[1], 'namespace': key[2], 'pod': key[3],
            'util_mean': util_mean, 'util_p95': values['util_p95'].get(key, util_mean),
            'mem_mean': 100.0 * used / total if total and used is not None else None,
            'mem_p95': 100.0 * used_p95 / total if total and used_p95 is not None else None,
            'hours': len(hourly.get(key, [])), 'hourly': hourly.get(key, []),
        })
    return series


# --------------------------------------------------------------------------- the API's allocations


def _gpus_requested(pod):
    total = 0
    for container in (pod.get('spec') or {}).get('containers') or []:
        resources = container.get('resources') or {}
        wanted = dict(resources.get('limits') or {}, **(resources.get('requests') or {}))
        total += sum(int(value) for name, value in wanted.items()
                     if name in GPU_RESOURCES or name.startswith(MIG_RESOURCE_PREFIX))
    return total


def allocations(pods):
    """{(namespace, pod): {node, gpus}} of the pods that hold GPUs now: scheduled, not finished, requesting any GPU
    resource (whole, shared or MIG)."""
    found = {}
    for pod in pods or []:
        spec, status = pod.get('spec') or {}, pod.get('status') or {}
        gpus = _gpus_requested(pod)
        if gpus and spec.get('nodeName') and status.get('phase') not in ('Succeeded', 'Failed'):
            meta = pod.get('metadata') or {}
            found[(meta.get('namespace', ''), meta.get('name', ''))] = {'node': spec['nodeName'], 'gpus': gpus}
    return found


# --------------------------------------------------------------------------- aggregation


def _weighted(series, field):
    pairs = [(item[field], max(item['hours'], 1)) for item in series if item[field] is not None]
    weight = sum(hours for _value, hours in pairs)
    return round(sum(value * hours for value, hours in pairs) / weight, 1) if weight else None


def _highest(series, field):
    values = [item[field] for item in series if item[field] is not None]
    return round(max(values), 1) if values else None


def _usage(series, price):
    hours = sum(item['hours'] for item in series)
    return {
        'gpu_hours': hours,
        'util_mean': _weighted(series, 'util_mean'), 'util_p95': _highest(series, 'util_p95'),
        'mem_mean': _weighted(series, 'mem_mean'), 'mem_p95': _highest(series, 'mem_p95'),
        'cost': round(hours * price, 2),
    }


def suggestion(row):
    """What to do with a workload under the threshold."""
    if row['util_p95'] is not None and row['util_p95'] < 5:
        return 'release its GPUs: they stayed idle (p95 compute under 5 %)'
    if row['mem_p95'] is not None and row['mem_p95'] < 50:
        return 'a smaller MIG profile: it uses under half of the GPU memory and little compute'
    return 'shared GPUs (time-slicing) in a development pool'


def _workloads(series, allocated, settings):
    by_pod = {}
    for item in series:
        if item['pod']:
            by_pod.setdefault((item['namespace'], item['pod']), []).append(item)
    rows = []
    for (namespace, pod), items in sorted(by_pod.items()):
        now = allocated.get((namespace, pod))
        row = dict(namespace=namespace, pod=pod, nodes=sorted(set(item['node'] for item in items)),
                   gpus_seen=len(set(item['uuid'] for item in items)), gpus_allocated=now['gpus'] if now else 0,
                   **_usage(items, settings['price_per_gpu_hour']))
        row['under_threshold'] = row['util_mean'] is not None and row['util_mean'] < settings['threshold_percent']
        row['suggestion'] = suggestion(row) if row['under_threshold'] else ''
        rows.append(row)
    return rows


def _namespaces(workloads, allocated, settings):
    names = sorted(set(row['namespace'] for row in workloads) | set(ns for ns, _pod in allocated)
                   | set(settings.get('quotas') or {}))
    rows = []
    for name in names:
        own = [row for row in workloads if row['namespace'] == name]
        hours = sum(row['gpu_hours'] for row in own)
        util = [(row['util_mean'], max(row['gpu_hours'], 1)) for row in own if row['util_mean'] is not None]
        weight = sum(hours_ for _value, hours_ in util)
        rows.append({
            'namespace': name, 'gpu_hours': hours, 'cost': round(hours * settings['price_per_gpu_hour'], 2),
            'util_mean': round(sum(value * w for value, w in util) / weight, 1) if weight else None,
            'gpus_allocated': sum(entry['gpus'] for (ns, _pod), entry in allocated.items() if ns == name),
            'quota': (settings.get('quotas') or {}).get(name),
            'workloads_under_threshold': len([row for row in own if row['under_threshold']]),
        })
    return rows


def _node_hourly(items):
    hours = {}
    for item in items:
        for timestamp, value in item['hourly']:
            hours.setdefault(timestamp, []).append(value)
    return [[int(timestamp), round(sum(values) / len(values), 1)] for timestamp, values in sorted(hours.items())]


def _nodes(series, settings):
    rows = []
    for node in sorted(set(item['node'] for item in series)):
        items = [item for item in series if item['node'] == node]
        row = dict(node=node, gpus=len(set(item['uuid'] for item in items)), **_usage(items, settings['price_per_gpu_hour']))
        row['idle_gpu_hours'] = sum(item['hours'] for item in items if not item['pod'])
        row['hourly'] = _node_hourly(items)
        rows.append(row)
    return rows


def _utc(end):
    """The window's end (a Unix time, as text or a number) as UTC, '' when not given."""
    try:
        return time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(float(end)))
    except (TypeError, ValueError):
        return ''


def usage_report(answers, pods, settings):
    """The report: per workload (namespace, pod), namespace and node, GPU-hours, mean and p95 compute and memory
    utilisation, cost, and the workloads under the threshold with a suggestion; ``problems`` names each source that did
    not answer or returned no series (the report then has no figures), ``no_data`` the pods that hold GPUs without a
    series.

    ``answers``: Prometheus's JSON answer per name of queries(); ``pods``: the API's Pod objects; ``settings``:
    window_hours, threshold_percent, price_per_gpu_hour, currency, end (the window's end, as text), quotas."""
    wanted = queries(settings['window_hours'])
    problems = [_source_problem(name, query, (answers or {}).get(name)) for name, query in wanted.items()]
    problems = [problem for problem in problems if problem]
    report = {'window': {'hours': settings['window_hours'], 'end': _utc(settings.get('end'))},
              'threshold_percent': settings['threshold_percent'], 'price_per_gpu_hour': settings['price_per_gpu_hour'],
              'currency': settings.get('currency', ''), 'queries': wanted, 'problems': problems}
    allocated = allocations(pods)
    if problems:
        return dict(report, workloads=[], namespaces=[], nodes=[], flagged=[], no_data=[], totals={})
    series = _series(answers)
    workloads = _workloads(series, allocated, settings)
    seen = set((row['namespace'], row['pod']) for row in workloads)
    report.update(
        workloads=workloads,
        namespaces=_namespaces(workloads, allocated, settings),
        nodes=_nodes(series, settings),
        flagged=[dict((key, row[key]) for key in ('namespace', 'pod', 'util_mean', 'mem_mean', 'gpu_hours', 'cost', 'suggestion'))
                 for row in workloads if row['under_threshold']],
        no_data=[{'namespace': ns, 'pod': pod, 'node': entry['node'], 'gpus': entry['gpus']}
                 for (ns, pod), entry in sorted(allocated.items()) if (ns, pod) not in seen],
    )
    report['totals'] = dict(_usage(series, settings['price_per_gpu_hour']),
                            gpus=len(set((item['node'], item['uuid']) for item in series)),
                            gpus_allocated=sum(entry['gpus'] for entry in allocated.values()),
                            idle_gpu_hours=sum(item['hours'] for item in series if not item['pod']))
    return report


# --------------------------------------------------------------------------- the report's settings


def _number(value):
    """``value`` as a number when it is one or its text is one (extra variables given as key=value are text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def settings_problems(settings):
    """What is wrong with the report playbook's settings, each naming the variable, the value and what is allowed."""
    out = []
    url = settings.get('report_prometheus_url')
    if not isinstance(url, str) or not url.startswith(('http://', 'https://')) or len(url.split('://', 1)[1]) == 0:
        out.append("report_prometheus_url is '%s': expected Prometheus's base URL with its scheme, such as "
                   "https://prometheus.example.internal:9090." % ('' if url is None else url))
    hours = _number(settings.get('report_window_hours'))
    if hours is None or hours != int(hours) or hours < 1:
        out.append('report_window_hours is %r: expected a whole number of hours, at least 1 (168 is a week).'
                   % (settings.get('report_window_hours'),))
    threshold = _number(settings.get('report_threshold_percent'))
    if threshold is None or not 0 < threshold <= 100:
        out.append('report_threshold_percent is %r: expected a number above 0 and at most 100.'
                   % (settings.get('report_threshold_percent'),))
    price = _number(settings.get('report_price_per_gpu_hour'))
    if price is None or price < 0:
        out.append('report_price_per_gpu_hour is %r: expected a number of at least 0.' % (settings.get('report_price_per_gpu_hour'),))
    end = settings.get('report_end')
    if end not in (None, '') and (_number(end) is None or _number(end) <= 0):
        out.append("report_end is %r: expected the window's end as a Unix time in seconds, or empty for now." % (end,))
    out += quota_problems(settings.get('gpufleet_gpu_quotas'))
    return out


def quota_problems(quotas):
    """gpufleet_gpu_quotas: {namespace: GPUs}, each a whole number of at least 0."""
    if quotas in (None, {}):
        return []
    if not isinstance(quotas, dict):
        return ['gpufleet_gpu_quotas is %r: expected a mapping of namespace to GPUs, such as {team-a: 4}.' % (quotas,)]
    return ['gpufleet_gpu_quotas.%s is %r: expected a whole number of GPUs, at least 0.' % (name, value)
            for name, value in sorted(quotas.items())
            if not isinstance(value, int) or isinstance(value, bool) or value < 0]


def answers_of(results):
    """{query name: Prometheus's JSON answer} of the report playbook's uri loop over queries() (``item`` is a
    dict2items entry); a request that failed becomes an error answer with the module's message."""
    answers = {}
    for result in results or []:
        name = (result.get('item') or {}).get('key')
        body = result.get('json')
        answers[name] = body if isinstance(body, dict) else {
            'status': 'error', 'error': result.get('msg') or 'HTTP status %s' % result.get('status')}
    return answers


# --------------------------------------------------------------------------- per-team quotas

QUOTA_NAME = 'gpufleet-gpu'
QUOTA_RESOURCES = ('requests.nvidia.com/gpu', 'requests.nvidia.com/gpu.shared')
MANAGED_BY = {'app.kubernetes.io/managed-by': 'gpufleet.node'}


def quota_objects(quotas):
    """The ResourceQuota of each namespace of ``quotas`` ({namespace: GPUs}): at most that many whole GPUs, and as
    many shared (time-sliced) ones, requested at once in the namespace."""
    return [{'apiVersion': 'v1', 'kind': 'ResourceQuota',
             'metadata': {'name': QUOTA_NAME, 'namespace': namespace, 'labels': dict(MANAGED_BY)},
             'spec': {'hard': dict((resource, str(gpus)) for resource in QUOTA_RESOURCES)}}
            for namespace, gpus in sorted((quotas or {}).items())]


def quotas_to_remove(existing, quotas):
    """The collection's ResourceQuotas (``existing``, as the API listed them) in namespaces ``quotas`` no longer names."""
    return [{'namespace': item['metadata']['namespace'], 'name': item['metadata']['name']} for item in existing or []
            if item['metadata'].get('name') == QUOTA_NAME and item['metadata']['namespace'] not in (quotas or {})]
