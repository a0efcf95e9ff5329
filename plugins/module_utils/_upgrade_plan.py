# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan upgrade_driver.yml prints before its first change (private to gpufleet.node), from explicit values: the
targets, the window, the batches and what each node of a batch starts from (its driver, and the MIG layout changes).

A value prints as the template before this function printed it (str(); None as nothing where it stands alone, as
'None' where joined)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.node.plugins.module_utils._report_text import printed as _printed

# The upgrade states a node does not resume from: none yet, or the last rollout finished on it.
FRESH_STATES = ('', 'upgrade-done', 'upgrade-required')


def _unique_targets(targets):
    """The targets in order, each once; case ignored, as Ansible's unique filter compares them."""
    seen, unique = set(), []
    for target in targets:
        key = target.lower() if isinstance(target, str) else target
        if key not in seen:
            seen.add(key)
            unique.append(target)
    return unique


def _headline(plan):
    check_mode = ' (check mode: nothing will be changed)' if plan['check_mode'] else ''
    return 'PLAN: NVIDIA driver %s on %s node(s)%s' % (', '.join(str(target) for target in _unique_targets(plan['targets'])),
                                                       len(plan['nodes']), check_mode)


def _window(plan):
    """The window's line: open until when, or closed until when (and whether that is ignored)."""
    state = plan['window_state']
    if state['open']:
        verdict = 'open, closes at %s' % (state['closes_at'],)
    else:
        ignored = ' (ignored: upgrade_driver_ignore_window)' if plan['ignore_window'] else ''
        verdict = 'closed, opens at %s%s' % (state['next_open'], ignored)
    return 'Window %s: %s; a batch needs up to %s s' % (json.dumps(plan['window']), verdict, _printed(plan['node_seconds']))


def _starting_point(host, start):
    """A node of a batch: the driver it runs and has installed, whether it was cordoned, the state it resumes after, and
    the GPUs whose MIG layout changes."""
    cordoned = ', cordoned before' if start['unschedulable'] else ''
    resumes = ', resumes after state %s' % (start['state'],) if start['state'] not in FRESH_STATES else ''
    mig = ''.join('; %s' % (_printed(change),) for change in start.get('mig_changes') or [])
    return '%s (runs %s, installed %s%s%s%s)' % (_printed(host), _printed(start['running'] or 'no driver'),
                                                 _printed(start['installed'] or 'none'), cordoned, resumes, mig)


def upgrade_plan(plan):
    """The plan, one line per item, without a final line break.

    ``plan``: ``targets`` (each host's target, in the play's order), ``nodes`` (each host of the play: what it starts
    from, its ``__upgrade_from``), ``batches`` (the hosts to change, batch by batch), ``up_to_date`` (the hosts
    skipped), ``window`` (upgrade_driver_window), ``window_state`` (driver_upgrade_window's verdict on it),
    ``ignore_window``, ``node_seconds`` and ``check_mode``."""
    lines = [_headline(plan)]
    if plan['window_state']['configured']:
        lines.append(_window(plan))
    for number, batch in enumerate(plan['batches'], 1):
        lines.append('Batch %d: %s' % (number, ', '.join(_starting_point(host, plan['nodes'][host]) for host in batch)))
    if not plan['batches']:
        lines.append('No node needs the change.')
    if plan['up_to_date']:
        lines.append('Up to date, skipped (no cordon, no drain): %s' % ', '.join(str(host) for host in plan['up_to_date']))
    return '\n'.join(lines).strip()
