# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the rolling driver upgrade (playbooks/upgrade_driver.yml): the checks of its settings, the
maintenance window, the batches, the cap on unavailable nodes, the disruption budgets that block a drain,
and apt's view of which package versions a node can install."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re
from datetime import datetime, timedelta, timezone

try:
    from zoneinfo import ZoneInfo
except ImportError:  # pragma: no cover - Python < 3.9 on the controller
    ZoneInfo = None

from ansible.errors import AnsibleFilterError

DAYS = ('mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun')
WINDOW_KEYS = ('days', 'start', 'end', 'timezone')
REBOOT_MODES = ('on_failed_reload', 'always', 'never')
GPU_POD_REMOVALS = ('evict', 'delete')
_CLOCK = re.compile(r'^([01][0-9]|2[0-3]):([0-5][0-9])$')
_PERCENT = re.compile(r'^([0-9]+)%$')


# --------------------------------------------------------------------------- settings


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _whole_at_least(value, minimum):
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return _is_int(value) and value >= minimum


def _count_or_percent_problem(name, value):
    """A positive whole number or a percentage from 1% to 100%; None when fine."""
    allowed = 'a positive whole number or a percentage from 1% to 100% (quoted, e.g. "25%")'
    if _is_int(value):
        return None if value >= 1 else '%s is %r: expected %s' % (name, value, allowed)
    if isinstance(value, str):
        if value.isdigit():
            return None if int(value) >= 1 else '%s is %r: expected %s' % (name, value, allowed)
        match = _PERCENT.match(value)
        if match and 1 <= int(match.group(1)) <= 100:
            return None
    return '%s is %r: expected %s' % (name, value, allowed)


def _window_problems(window):
    name = 'upgrade_driver_window'
    if window in (None, '', {}):
        return []
    if not isinstance(window, dict):
        return ['%s is %r: expected a mapping with start, end and optionally days and timezone, or {} for no window'
                % (name, window)]
    problems = ['%s has the unknown key %r: allowed keys are %s' % (name, key, ', '.join(WINDOW_KEYS))
                for key in sorted(window) if key not in WINDOW_KEYS]
    for key in ('start', 'end'):
        value = window.get(key)
        if not isinstance(value, str) or not _CLOCK.match(value):
            problems.append('%s.%s is %r: expected a time of day as "HH:MM" (00:00 to 23:59, quoted)' % (name, key, value))
    days = window.get('days', list(DAYS))
    if not isinstance(days, list) or not days or any(not isinstance(day, str) or day.lower() not in DAYS for day in days):
        problems.append('%s.days is %r: expected a non-empty list of %s' % (name, days, ', '.join(DAYS)))
    zone = window.get('timezone', 'UTC')
    if _zone(zone) is None:
        problems.append('%s.timezone is %r: expected an IANA time zone such as UTC or Europe/Berlin' % (name, zone))
    return problems


def _zone(name):
    if name in ('UTC', 'Etc/UTC'):
        return timezone.utc
    if not isinstance(name, str) or ZoneInfo is None:
        return None
    try:
        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, ValueError for malformed keys
        return None


def _now_problem(now):
    if now in (None, ''):
        return None
    try:
        _parse_now(now)
    except ValueError:
        return ('upgrade_driver_now is %r: expected an ISO 8601 time with its offset, e.g. 2026-12-05T23:30:00+01:00, '
                'or empty for the controller\'s clock' % (now,))
    return None


def driver_upgrade_problems(settings):
    """Every problem of the play's settings, each naming the variable, its value and what is allowed."""
    problems = []
    batch = settings.get('batch_size')
    if isinstance(batch, list):
        if not batch:
            problems.append('upgrade_driver_batch_size is []: expected a number, a percentage, or a non-empty list of those')
        problems += [p for p in (_count_or_percent_problem('upgrade_driver_batch_size[%d]' % i, v)
                                 for i, v in enumerate(batch)) if p]
    else:
        problems += [p for p in [_count_or_percent_problem('upgrade_driver_batch_size', batch)] if p]
    problems += [p for p in [_count_or_percent_problem('upgrade_driver_max_unavailable', settings.get('max_unavailable'))] if p]
    problems += _window_problems(settings.get('window'))
    for name in ('node_seconds', 'drain_timeout', 'drain_delay', 'pod_deletion_timeout'):
        if name in settings and not _whole_at_least(settings[name], 1):
            problems.append('upgrade_driver_%s is %r: expected a whole number of seconds (1 or more)' % (name, settings[name]))
    if 'reboot' in settings and settings.get('reboot') not in REBOOT_MODES:
        problems.append('upgrade_driver_reboot is %r: allowed values are %s' % (settings.get('reboot'), ', '.join(REBOOT_MODES)))
    if 'gpu_pod_removal' in settings and settings.get('gpu_pod_removal') not in GPU_POD_REMOVALS:
        problems.append('upgrade_driver_gpu_pod_removal is %r: allowed values are %s (evict honours the PodDisruptionBudgets, '
                        'delete does not)' % (settings.get('gpu_pod_removal'), ', '.join(GPU_POD_REMOVALS)))
    command = settings.get('reboot_command', [])
    if not (isinstance(command, list) and all(isinstance(word, str) and word for word in command)):
        problems.append('upgrade_driver_reboot_command is %r: expected a list of words, the command and its arguments '
                        '(for example [systemctl, reboot]), or [] for the default reboot; a string is not split'
                        % (command,))
    now_problem = _now_problem(settings.get('now'))
    if now_problem:
        problems.append(now_problem)
    return problems


# --------------------------------------------------------------------------- window


def _parse_now(now):
    if now in (None, ''):
        return datetime.now(timezone.utc)
    if isinstance(now, datetime):
        moment = now
    else:
        moment = datetime.fromisoformat(str(now).replace('Z', '+00:00'))
    if moment.tzinfo is None:
        raise ValueError('no offset')
    return moment


def _minutes(clock):
    hours, minutes = clock.split(':')
    return int(hours) * 60 + int(minutes)


def _instances(window, moment):
    """The window's occurrences (start, end) in UTC from eight days before to eight days after the moment."""
    zone = _zone(window.get('timezone', 'UTC'))
    days = [DAYS.index(day.lower()) for day in window.get('days', list(DAYS))]
    start, end = _minutes(window['start']), _minutes(window['end'])
    length = (end - start) % 1440 or 1440  # an end at or before the start is on the next day
    local_day = moment.astimezone(zone).date()
    for offset in range(-8, 9):
        day = local_day + timedelta(days=offset)
        if day.weekday() in days:
            opens = datetime(day.year, day.month, day.day, start // 60, start % 60, tzinfo=zone)
            yield opens.astimezone(timezone.utc), (opens + timedelta(minutes=length)).astimezone(timezone.utc)


def driver_upgrade_window(window, now='', needed_seconds=0):
    """Where the moment stands in the maintenance window.

    Returns configured, open, fits (open and the needed time ends before it closes), now, closes_at and
    next_open (ISO 8601, UTC; empty when not applicable)."""
    problems = _window_problems(window) + [p for p in [_now_problem(now)] if p]
    if problems:
        raise AnsibleFilterError('; '.join(problems))
    moment = _parse_now(now).astimezone(timezone.utc)
    result = {'configured': window not in (None, '', {}), 'now': moment.isoformat(), 'open': True, 'fits': True,
              'closes_at': '', 'next_open': ''}
    if not result['configured']:
        return result
    instances = sorted(_instances(window, moment))
    current = [end for start, end in instances if start <= moment < end]
    later = [start for start, end in instances if start > moment]
    result['open'] = bool(current)
    result['closes_at'] = max(current).isoformat() if current else ''
    result['fits'] = bool(current) and moment + timedelta(seconds=int(needed_seconds)) <= max(current)
    result['next_open'] = min(later).isoformat() if later else ''
    return result


# --------------------------------------------------------------------------- batches and the cap


def _scaled(value, total, round_up):
    if isinstance(value, str) and value.endswith('%'):
        share = int(value[:-1]) / 100.0 * total
        return max(1, int(math.ceil(share) if round_up else int(share)))
    return int(value)


def driver_upgrade_batches(hosts, batch_size):
    """The hosts in batches as Ansible's ``serial`` forms them (a percentage of the hosts, at least one; the last
    value of a list repeats)."""
    problems = driver_upgrade_problems({'batch_size': batch_size, 'max_unavailable': 1})
    if problems:
        raise AnsibleFilterError('; '.join(problems))
    sizes = batch_size if isinstance(batch_size, list) else [batch_size]
    remaining, batches, index = list(hosts), [], 0
    while remaining:
        size = _scaled(sizes[min(index, len(sizes) - 1)], len(hosts), round_up=False)
        batches.append(remaining[:size])
        remaining = remaining[size:]
        index += 1
    return batches


def driver_upgrade_cap(max_unavailable, total):
    """How many GPU nodes may be unavailable at once: a number, or a percentage of all GPU nodes rounded up
    (at least one), as NVIDIA's upgrade controller counts it."""
    problem = _count_or_percent_problem('upgrade_driver_max_unavailable', max_unavailable)
    if problem:
        raise AnsibleFilterError(problem)
    return _scaled(max_unavailable, int(total), round_up=True)


def _ready(node):
    conditions = ((node.get('status') or {}).get('conditions') or [])
    return next((condition.get('status') for condition in conditions if condition.get('type') == 'Ready'), 'Unknown') == 'True'


def _cordoned(node):
    return bool((node.get('spec') or {}).get('unschedulable', False))


def _over_the_cap(nodes, batch, max_unavailable):
    """Why the batch would take more GPU nodes out of service than the cap allows; '' when it would not. A node of the
    batch that an operator already cordoned takes no capacity away (NVIDIA's controller lets it go on)."""
    names = [(node.get('metadata') or {}).get('name') for node in nodes]
    others_out = [name for name, node in zip(names, nodes) if name not in batch and (_cordoned(node) or not _ready(node))]
    new_out = len([name for name, node in zip(names, nodes) if name in batch and not _cordoned(node)])
    cap = driver_upgrade_cap(max_unavailable, len(nodes))
    if new_out == 0 or len(others_out) + new_out <= cap:
        return ''
    return ('the batch would make %d GPU node(s) unavailable (%s), more than upgrade_driver_max_unavailable %s allows '
            '(%d of %d)' % (len(others_out) + new_out, ', '.join(others_out + list(batch)), max_unavailable, cap, len(nodes)))


def driver_upgrade_disagreements(upgrades, keys):
    """The rollout settings (``keys`` of each host's ``upgrades`` entry) the hosts of a run disagree on, as the
    upgrade_driver_* variables that set them."""
    return ['upgrade_driver_' + key for key in keys
            if len(set(json.dumps(upgrade.get(key), sort_keys=True) for upgrade in upgrades)) > 1]


def _excludes_paused(term, pause_rule):
    return 'matchExpressions' in term and pause_rule in (term.get('matchExpressions') or [])


def daemonsets_without_pause(daemonsets, pause_rule):
    """The device plugin DaemonSets that would keep their pod on a node the rollout pauses: their node affinity's
    required terms (ORed) are missing, or one of them lacks ``pause_rule``."""
    without = []
    for daemonset in daemonsets:
        pod_spec = ((daemonset.get('spec') or {}).get('template') or {}).get('spec') or {}
        terms = (((pod_spec.get('affinity') or {}).get('nodeAffinity') or {})
                 .get('requiredDuringSchedulingIgnoredDuringExecution') or {}).get('nodeSelectorTerms') or []
        if not terms or not all(_excludes_paused(term, pause_rule) for term in terms):
            without.append(daemonset['metadata']['name'])
    return without


def driver_upgrade_stop(nodes, batch, rollout):
    """Why the next batch of the rollout may not start, '' when it may: an earlier reason (C(stopped)), a node of an
    earlier batch that failed (C(failed)), the API server's error when the pool's Nodes could not be read
    (C(api_error)), a maintenance window (C(window), driver_upgrade_window's verdict) that closes
    before a batch of C(node_seconds) could finish unless C(ignore_window), or more GPU nodes (``nodes``, the pool's
    Nodes) out of service than C(max_unavailable) allows once the batch (``batch``, its Node names) is cordoned."""
    if rollout.get('stopped'):
        return rollout['stopped']
    if rollout.get('failed'):
        return 'a node of an earlier batch failed (%s)' % ', '.join(rollout['failed'])
    if rollout.get('api_error'):
        return ('the API server did not answer (%s), so the GPU nodes out of service could not be counted'
                % (rollout['api_error'],))
    window = rollout['window']
    if not (window.get('fits') or rollout.get('ignore_window')):
        return ('the maintenance window closes at %s, before a batch of up to %s s (upgrade_driver_node_seconds) could '
                'finish; it opens again at %s' % (window.get('closes_at'), rollout['node_seconds'], window.get('next_open')))
    return _over_the_cap(nodes, batch, rollout['max_unavailable'])


# --------------------------------------------------------------------------- disruption budgets


def _selects(selector, labels):
    if selector is None:
        return False
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get('matchExpressions') or []:
        key, operator, values = expression.get('key'), expression.get('operator'), expression.get('values') or []
        if operator == 'In' and labels.get(key) not in values:
            return False
        if operator == 'NotIn' and key in labels and labels[key] in values:
            return False
        if operator == 'Exists' and key not in labels:
            return False
        if operator == 'DoesNotExist' and key in labels:
            return False
    return True


def blocking_disruption_budgets(pods, budgets):
    """``namespace/name`` of the PodDisruptionBudgets that select one of the pods and allow no disruption now."""
    blocking = []
    for budget in budgets:
        meta, spec, status = budget.get('metadata', {}), budget.get('spec', {}), budget.get('status', {})
        if int(status.get('disruptionsAllowed', 0) or 0) > 0:
            continue
        selected = [pod for pod in pods
                    if pod.get('metadata', {}).get('namespace') == meta.get('namespace')
                    and _selects(spec.get('selector'), pod.get('metadata', {}).get('labels') or {})]
        if selected:
            name = '%s/%s' % (meta.get('namespace'), meta.get('name'))
            if name not in blocking:
                blocking.append(name)
    return blocking


# --------------------------------------------------------------------------- apt


def apt_policy_versions(text):
    """``apt-cache policy PKG...`` as {package: {installed, candidate, versions}} (versions of the version table)."""
    packages, current, in_table = {}, None, False
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(':'):
            current = line.rstrip()[:-1].split(':')[0]
            packages[current] = {'installed': '', 'candidate': '', 'versions': []}
            in_table = False
        elif current is None or not line.strip():
            continue
        elif line.strip().startswith(('Installed:', 'Candidate:')):
            key, _sep, value = line.strip().partition(':')
            packages[current][key.lower()] = '' if value.strip() == '(none)' else value.strip()
        elif line.strip() == 'Version table:':
            in_table = True
        elif in_table:
            # "     535.261.03-1 500" or " *** 535.216.03-2~bpo12+1 100"; repository lines have three leading words
            match = re.match(r'^ (?:\*\*\*| {3}) (\S+) (-?[0-9]+)$', line)
            if match:
                packages[current]['versions'].append(match.group(1))
    return packages


# --------------------------------------------------------------------------- pods


def _owned_by_daemonset(pod):
    return any(owner.get('kind') == 'DaemonSet' for owner in pod.get('metadata', {}).get('ownerReferences') or [])


def _active(pod):
    return pod.get('status', {}).get('phase') not in ('Succeeded', 'Failed')


def _uses_gpu(pod):
    spec = pod.get('spec', {})
    for container in (spec.get('containers') or []) + (spec.get('initContainers') or []):
        resources = container.get('resources') or {}
        names = list((resources.get('limits') or {}).keys()) + list((resources.get('requests') or {}).keys())
        if any(name.startswith('nvidia.com/') for name in names):
            return True
    return False


def gpu_pods(pods):
    """The running or pending pods that ask for an NVIDIA resource, DaemonSet pods (the device plugin's) excluded."""
    return [pod for pod in pods if _active(pod) and _uses_gpu(pod) and not _owned_by_daemonset(pod)]


def evictable_pods(pods):
    """The pods a drain must move: not finished, not DaemonSet pods, not the kubelet's mirror pods."""
    return [pod for pod in pods if _active(pod) and not _owned_by_daemonset(pod)
            and 'kubernetes.io/config.mirror' not in (pod.get('metadata', {}).get('annotations') or {})]


class FilterModule(object):
    def filters(self):
        return {
            'driver_upgrade_problems': driver_upgrade_problems,
            'driver_upgrade_window': driver_upgrade_window,
            'driver_upgrade_batches': driver_upgrade_batches,
            'driver_upgrade_cap': driver_upgrade_cap,
            'driver_upgrade_stop': driver_upgrade_stop,
            'driver_upgrade_disagreements': driver_upgrade_disagreements,
            'daemonsets_without_pause': daemonsets_without_pause,
            'blocking_disruption_budgets': blocking_disruption_budgets,
            'apt_policy_versions': apt_policy_versions,
            'gpu_pods': gpu_pods,
            'evictable_pods': evictable_pods,
        }
