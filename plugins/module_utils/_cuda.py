# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which CUDA a driver runs (private to gpufleet.node): NVIDIA's table of the driver each CUDA release needs, the
gate that refuses a driver too old for the fleet's images, and the host check of the CUDA version nvidia-smi prints.

A driver runs every CUDA up to the one it shipped with (nvidia-smi's "CUDA Version"). An image built with a newer
CUDA fails at run time with "CUDA driver version is insufficient for CUDA runtime version", unless it carries NVIDIA's
forward compatibility package (cuda-compat), which only data center GPUs accept."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# NVIDIA's CUDA Toolkit release notes, table "CUDA Toolkit and Corresponding Driver Versions", Linux x86_64: the driver
# each CUDA minor release's GA shipped with ("Toolkit Driver Version"), the oldest that runs all of it; read in the
# 13.2 Update 2 notes (docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/) for 11.8 to 13.2. From 13.4 the
# notes name a driver branch per minor release instead ("Corresponding Driver Branch": 13.3 R610, 13.4 R615): any
# driver of that branch or later. CUDA 13.5's driver section could not be read when the table was last checked; it is
# not listed, so a fleet naming it is told the table does not know it rather than let through.
TABLE_SOURCE = 'NVIDIA CUDA Toolkit release notes, https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ ("CUDA Driver")'
TABLE_CHECKED = '2026-12-06'
MINIMUM_DRIVER = {
    '11.8': '520.61.05',
    '12.0': '525.60.13',
    '12.1': '530.30.02',
    '12.2': '535.54.03',
    '12.3': '545.23.06',
    '12.4': '550.54.14',
    '12.5': '555.42.02',
    '12.6': '560.28.03',
    '12.8': '570.26',
    '12.9': '575.51.03',
    '13.0': '580.65.06',
    '13.1': '590.44.01',
    '13.2': '595.45.04',
    '13.3': '610',
    '13.4': '615',
}
RELEASE = re.compile(r'^([0-9]+)\.([0-9]+)$')
# GPUs forward compatibility does not serve (NVIDIA: data center GPUs and select NGC Server Ready RTX SKUs only).
CONSUMER_GPU = re.compile(r'GeForce|TITAN', re.IGNORECASE)


def _numbers(version):
    return tuple(int(part) for part in re.findall(r'[0-9]+', str(version)))


def known_releases():
    return sorted(MINIMUM_DRIVER, key=_numbers)


def release_problems(values, variable):
    """One message per entry of ``values`` (the CUDA versions of a setting named ``variable``) that is not a CUDA
    release of the table, given as text."""
    if not isinstance(values, list):
        return ['%s is %r: expected a list of CUDA versions such as ["12.4", "13.0"].' % (variable, values)]
    out = []
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append('%s has %s, a number: YAML reads an unquoted version as a number and drops its trailing zeros '
                       '(12.10 becomes 12.1). Quote it: "%s".' % (variable, value, value))
        elif not isinstance(value, str) or not RELEASE.match(value):
            out.append("%s has '%s': expected a CUDA release as major.minor, such as \"12.4\"." % (variable, value))
        elif value not in MINIMUM_DRIVER:
            out.append("%s has '%s': not a CUDA release NVIDIA's table names (%s, as of %s). Use one of those, "
                       'the release the images were built with.' % (variable, value, ', '.join(known_releases()), TABLE_CHECKED))
    return out


def version_problems(values, variable='cuda_versions'):
    """What the modules refuse in their CUDA versions ('' for nothing): an entry that is not major.minor. A release newer
    than the table still compares with what nvidia-smi prints."""
    bad = [value for value in values or [] if not RELEASE.match(str(value))]
    if not bad:
        return ''
    return '%s has %s: expected CUDA releases as major.minor, such as 12.4' % (variable, ', '.join(repr(value) for value in bad))


def highest(values):
    """The highest CUDA release of ``values`` (text major.minor), '' for none."""
    return max(values, key=_numbers) if values else ''


def highest_run_by(driver):
    """The highest CUDA release of the table that ``driver`` (an NVIDIA driver version) runs, '' for none."""
    runs = [cuda for cuda, minimum in MINIMUM_DRIVER.items() if _numbers(driver) >= _numbers(minimum)]
    return highest(runs)


def driver_problems(driver, cuda_versions, forward_compat, names):
    """The gate before any change: a pinned ``driver`` too old for the highest of ``cuda_versions``, unless the images
    carry the forward compatibility package (``forward_compat``). ``names``: the settings' names, for the message
    (driver, cuda_versions, forward_compat)."""
    needed = highest(cuda_versions)
    if not needed or forward_compat or _numbers(driver) >= _numbers(MINIMUM_DRIVER[needed]):
        return []
    runs = highest_run_by(driver)
    return ['%s is %s, which runs CUDA up to %s, but %s needs CUDA %s: CUDA %s needs driver %s or later (%s, as of %s). '
            'Pin a driver of branch %s or later, or, when the images carry NVIDIA\'s cuda-compat package and the GPUs '
            'are data center GPUs, set %s=true.'
            % (names[0], driver, runs or 'no release of the table', names[1], needed, needed, MINIMUM_DRIVER[needed],
               TABLE_SOURCE, TABLE_CHECKED, MINIMUM_DRIVER[needed].split('.')[0], names[2])]


def host_check(observed, cuda_versions, forward_compat, gpu_names, unread_reason=''):
    """(status, message, remedy) of a node whose driver runs CUDA up to ``observed`` (nvidia-smi's "CUDA Version",
    None when unread) against the fleet's ``cuda_versions``."""
    needed = highest(cuda_versions)
    if not observed:
        if not needed:
            return 'skip', 'the CUDA version the driver runs was not read%s' % (': ' + unread_reason if unread_reason else ''), ''
        return ('fail', 'the fleet needs CUDA %s, but the CUDA version the driver runs could not be read%s'
                % (needed, ': ' + unread_reason if unread_reason else ''), 'fix nvidia_smi_runs first')
    if not needed:
        return 'pass', 'the driver runs CUDA up to %s (nvidia-smi)' % observed, ''
    if _numbers(observed) >= _numbers(needed):
        return 'pass', 'the driver runs CUDA up to %s; the fleet needs %s' % (observed, needed), ''
    minimum = MINIMUM_DRIVER.get(needed)
    upgrade = ('upgrade the driver to %s or later (CUDA %s needs it: NVIDIA\'s release notes) with upgrade_driver.yml'
               % (minimum, needed)) if minimum else 'upgrade the driver to one that runs CUDA %s' % needed
    consumer = sorted(set(name for name in gpu_names if CONSUMER_GPU.search(name)))
    if forward_compat and not consumer:
        return ('warn', 'the driver runs CUDA up to %s; the fleet\'s CUDA %s runs only in images that carry NVIDIA\'s '
                'cuda-compat package (forward compatibility)' % (observed, needed), upgrade + ' to run it natively')
    why = (' (forward compatibility is not available on %s)' % ', '.join(consumer)) if forward_compat else ''
    return ('fail', 'the driver runs CUDA up to %s, but the fleet\'s images need CUDA %s%s: they fail with "CUDA driver '
            'version is insufficient for CUDA runtime version"' % (observed, needed, why), upgrade)
