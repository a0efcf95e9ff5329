# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""MIG layouts (private to gpufleet.node): NVIDIA's mig-parted configuration format, NVIDIA's table of the GPU instance
profiles each GPU model offers, whether a model can hold a layout, what nvidia-smi's MIG listings say a GPU holds now,
and the nvidia-smi commands that move it to the layout.

A layout gives each GPU a MIG mode and, with MIG on, a count per GPU instance profile; every GPU instance gets one
compute instance that spans it (nvidia-smi's C(-C)), which is what the device plugin advertises."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The GPU instance profiles of the 7-slice GPUs (A100, H100, H200) share one geometry; the names differ by the memory
# of a slice. Each row: profile ID (as nvidia-smi mig -lgip prints it), compute slices, memory slices (eighths), the
# placements' first memory slice (as nvidia-smi mig -lgipp prints them) and the instances a GPU holds at most.
# Names and counts: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (A100 40GB and 80GB, H100 80GB, H200
# 141GB). IDs and placements: the guide's "Getting Started with MIG" prints them for A100 40GB (nvidia-smi mig -lgip,
# -lgipp); NVIDIA's go-nvml mock of the A100 gives the same placements for 80GB; a real H100 80GB HBM3 prints the same
# IDs and placements; a real H200 prints the same IDs and counts (NVIDIA/mig-parted issue 120), its placements are
# taken to be the H100's (same IDs and fractions; no -lgipp of an H200 was found).
TABLE_SOURCE = ('NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles", '
                'https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html')
TABLE_CHECKED = '2026-12-07'
MEMORY_SLICES = 8
COMPUTE_SLICES = 7
GEOMETRY = {
    0: (7, 8, (0,), 1),
    5: (4, 4, (0,), 1),
    9: (3, 4, (0, 4), 2),
    14: (2, 2, (0, 2, 4), 3),
    15: (1, 2, (0, 2, 4, 6), 4),
    19: (1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    20: (1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
}
_NAMES_80GB = {0: '7g.80gb', 5: '4g.40gb', 9: '3g.40gb', 14: '2g.20gb', 15: '1g.20gb', 19: '1g.10gb', 20: '1g.10gb+me'}
# (model, the GPU names nvidia-smi prints for it, profile ID -> name)
MODELS = (
    ('A100 40GB', re.compile(r'\bA100\b.*\b40GB\b'),
     {0: '7g.40gb', 5: '4g.20gb', 9: '3g.20gb', 14: '2g.10gb', 15: '1g.10gb', 19: '1g.5gb', 20: '1g.5gb+me'}),
    ('A100 80GB', re.compile(r'\bA100\b.*\b80GB\b'), _NAMES_80GB),
    ('H100 80GB', re.compile(r'\bH100\b(?!.*\b(NVL|94GB|96GB)\b)'), _NAMES_80GB),
    ('H200 141GB', re.compile(r'\bH200\b'),
     {0: '7g.141gb', 5: '4g.71gb', 9: '3g.71gb', 14: '2g.35gb', 15: '1g.35gb', 19: '1g.18gb', 20: '1g.18gb+me'}),
)

ENTRY_KEYS = ('devices', 'mig-enabled', 'mig-devices', 'device-filter')
PROFILE_NAME = re.compile(r'^[0-9]+g\.[0-9]+gb(\+me|\+me\.all|\+gfx|-me)?$')
COMPUTE_INSTANCE_PROFILE = re.compile(r'^[0-9]+c\.[0-9]+g\.[0-9]+gb')
DEVICE_ID = re.compile(r'^0x[0-9a-fA-F]{8}$')
# nvidia-smi mig -lgi: | GPU  Name  Profile ID  Instance ID  Placement Start:Size |
LGI_ROW = re.compile(r'^\|\s*([0-9]+)\s+MIG\s+(\S+)\s+([0-9]+)\s+([0-9]+)\s+([0-9]+):([0-9]+)\s*\|$')
# nvidia-smi mig -lci: | GPU  GPU instance ID  Name  Profile ID  Instance ID  Placement Start:Size |
# (drivers before R535 print no placement column)
LCI_ROW = re.compile(r'^\|\s*([0-9]+)\s+([0-9]+)\s+MIG\s+(\S+)\s+([0-9]+)\s+([0-9]+)(?:\s+([0-9]+):([0-9]+))?\s*\|$')
NOTHING_LISTED = ('No MIG-enabled devices found', 'No GPU instances found', 'No compute instances found')


class MigListingError(ValueError):
    """nvidia-smi printed something that is not a MIG listing (an error such as Insufficient Permissions)."""


# ----------------------------------------------------------------------------------------------- the profile table

def model_of(gpu_name):
    """(model, profile ID -> name) of the GPU named ``gpu_name`` as nvidia-smi prints it; (None, {}) when the table has
    no such model."""
    for model, pattern, names in MODELS:
        if pattern.search(str(gpu_name)):
            return model, names
    return None, {}


def known_models():
    return [model for model, _pattern, _names in MODELS]


def _free(used, start, size):
    return all(not used[slot] for slot in range(start, start + size))


def placements(names, devices):
    """Where each GPU instance of ``devices`` (profile name -> count) goes on a GPU whose profiles are ``names``
    (profile ID -> name): [(name, profile ID, start, size)] in creation order (largest first), or None when the GPU
    cannot hold them all (out of compute slices, or no placement leaves room for every instance)."""
    ids = dict((name, profile_id) for profile_id, name in names.items())
    wanted = []
    for name, count in devices.items():
        wanted += [ids[name]] * count
    if sum(GEOMETRY[profile_id][0] for profile_id in wanted) > COMPUTE_SLICES:
        return None
    wanted.sort(key=lambda profile_id: (-GEOMETRY[profile_id][1], -GEOMETRY[profile_id][0], profile_id))
    used = [False] * MEMORY_SLICES
    chosen = []

    def place(position):
        if position == len(wanted):
            return True
        profile_id = wanted[position]
        _compute, size, starts, _most = GEOMETRY[profile_id]
        for start in sorted(starts, reverse=True):
            if _free(used, start, size):
                for slot in range(start, start + size):
                    used[slot] = True
                chosen.append((names[profile_id], profile_id, start, size))
                if place(position + 1):
                    return True
                chosen.pop()
                for slot in range(start, start + size):
                    used[slot] = False
        return False

    return chosen if place(0) else None


def fit_problems(gpu_name, devices, where):
    """Why the GPU named ``gpu_name`` cannot hold ``devices`` (profile name -> count); ``where`` names the GPU and the
    setting in the messages."""
    model, names = model_of(gpu_name)
    if model is None:
        return ['%s: %s is not a GPU model of the MIG profile table (%s; %s, as of %s)'
                % (where, gpu_name, ', '.join(known_models()), TABLE_SOURCE, TABLE_CHECKED)]
    offered = sorted(names.values(), key=_profile_order)
    unknown = sorted(name for name in devices if name not in offered)
    if unknown:
        return ['%s: %s has no MIG profile %s (its profiles: %s)' % (where, model, ', '.join(unknown), ', '.join(offered))]
    by_name = dict((name, profile_id) for profile_id, name in names.items())
    over = ['%d x %s (at most %d)' % (count, name, GEOMETRY[by_name[name]][3])
            for name, count in sorted(devices.items()) if count > GEOMETRY[by_name[name]][3]]
    if over:
        return ['%s: %s holds fewer instances: %s' % (where, model, ', '.join(over))]
    if placements(names, devices) is None:
        compute = sum(GEOMETRY[by_name[name]][0] * count for name, count in devices.items())
        memory = sum(GEOMETRY[by_name[name]][1] * count for name, count in devices.items())
        return ['%s: %s cannot hold %s: it needs %d of %d compute slices and %d of %d memory slices, and the '
                'instances must find placements that do not overlap (%s)'
                % (where, model, describe(devices), compute, COMPUTE_SLICES, memory, MEMORY_SLICES, TABLE_SOURCE)]
    return []


def _profile_order(name):
    numbers = [int(part) for part in re.findall('[0-9]+', name)]
    return (-numbers[0], -numbers[1], name)


def describe(devices):
    """'1 x 3g.40gb, 2 x 1g.10gb' for a profile name -> count mapping (largest first), 'no MIG devices' for none."""
    parts = ['%d x %s' % (count, name) for name, count in sorted(devices.items(), key=lambda item: _profile_order(item[0]))
             if count]
    return ', '.join(parts) or 'no MIG devices'


# ------------------------------------------------------------------------------ NVIDIA's mig-parted configuration

def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry_problems(entry, where):
    if not isinstance(entry, dict):
        return ['%s is %r: expected a mapping with devices, mig-enabled and, with MIG on, mig-devices' % (where, entry)]
    out = ['%s has %s: the keys of a mig-parted entry are %s' % (where, key, ', '.join(ENTRY_KEYS))
           for key in sorted(str(key) for key in entry if key not in ENTRY_KEYS)]
    devices = entry.get('devices')
    if devices != 'all' and not (isinstance(devices, list) and devices and all(_is_count(index) for index in devices)
                                 and len(set(devices)) == len(devices)):
        out.append('%s.devices is %r: expected all, or a list of distinct GPU indexes such as [0, 1]' % (where, devices))
    enabled = entry.get('mig-enabled')
    if not isinstance(enabled, bool):
        out.append('%s.mig-enabled is %r: expected true or false' % (where, enabled))
    mig_devices = entry.get('mig-devices', {})
    if enabled is True and 'mig-devices' not in entry:
        out.append('%s has mig-enabled true without mig-devices: name the MIG devices, or {} for none' % where)
    if not isinstance(mig_devices, dict):
        out.append('%s.mig-devices is %r: expected a mapping of MIG profile to count, such as {"1g.10gb": 7}' % (where, mig_devices))
    else:
        if mig_devices and enabled is False:
            out.append('%s has mig-devices with mig-enabled false: a GPU without MIG holds no MIG devices' % where)
        for name, count in sorted(mig_devices.items(), key=lambda item: str(item[0])):
            if COMPUTE_INSTANCE_PROFILE.match(str(name)):
                out.append('%s.mig-devices has %s: compute instances that share a GPU instance are not supported; '
                           'name GPU instance profiles such as 3g.40gb' % (where, name))
            elif not PROFILE_NAME.match(str(name)):
                out.append('%s.mig-devices has %r: expected a MIG profile name such as 1g.10gb or 1g.10gb+me' % (where, name))
            if not _is_count(count):
                out.append('%s.mig-devices.%s is %r: expected a count, 0 or more' % (where, name, count))
    device_filter = entry.get('device-filter', [])
    filters = device_filter if isinstance(device_filter, list) else [device_filter]
    if not all(isinstance(item, str) and DEVICE_ID.match(item) for item in filters):
        out.append('%s.device-filter is %r: expected PCI device IDs such as 0x20B210DE (nvidia-smi --query-gpu=pci.device_id)'
                   % (where, device_filter))
    return out


def config_problems(document, variable):
    """What is wrong with ``document``, a mig-parted configuration (version v1, mig-configs), given as ``variable``."""
    if not isinstance(document, dict):
        return ['%s is %r: expected a mig-parted configuration, a mapping with version v1 and mig-configs' % (variable, document)]
    out = []
    if document.get('version') != 'v1':
        out.append('%s.version is %r: the mig-parted configuration format this collection reads is v1' % (variable, document.get('version')))
    out += ['%s has %s: a mig-parted configuration has version and mig-configs' % (variable, key)
            for key in sorted(str(key) for key in document if key not in ('version', 'mig-configs'))]
    configs = document.get('mig-configs')
    if not isinstance(configs, dict) or not configs:
        return out + ['%s.mig-configs is %r: expected a mapping of layout names to lists of entries' % (variable, configs)]
    for name, entries in sorted(configs.items(), key=lambda item: str(item[0])):
        where = '%s.mig-configs.%s' % (variable, name)
        if not isinstance(entries, list) or not entries:
            out.append('%s is %r: expected a list of entries' % (where, entries))
            continue
        for position, entry in enumerate(entries):
            out += _entry_problems(entry, '%s[%d]' % (where, position))
    return out


def selection_problems(document, selected, names):
    """A layout name ``selected`` that ``document`` does not define; ``names``: (the document's, the selection's
    setting names)."""
    if selected in (None, ''):
        return []
    if not isinstance(selected, str):
        return ['%s is %r: expected the name of a layout of %s' % (names[1], selected, names[0])]
    configs = document.get('mig-configs') if isinstance(document, dict) else None
    known = sorted(configs) if isinstance(configs, dict) else []
    if selected not in known:
        return ["%s is '%s': %s defines no such layout (%s)" % (names[1], selected, names[0], ', '.join(known) or 'none')]
    return []


def _applies(entry, gpu):
    devices = entry.get('devices')
    if devices != 'all' and gpu['index'] not in devices:
        return False
    device_filter = entry.get('device-filter')
    if device_filter in (None, [], ''):
        return True
    filters = device_filter if isinstance(device_filter, list) else [device_filter]
    return str(gpu.get('pci_device_id', '')).lower() in [item.lower() for item in filters]


def wanted_layout(document, selected, gpus, where):
    """({GPU index: {mig_enabled, devices}}, problems) of the node's ``gpus`` ([{index, name, pci_device_id}]) under
    layout ``selected`` of ``document``. A GPU no entry names keeps what it has; one named by two entries, an index
    the node does not have and a layout its model cannot hold are problems (``where``: the node and the setting)."""
    entries = document['mig-configs'][selected]
    indexes = set(gpu['index'] for gpu in gpus)
    out = {}
    problems = ['%s: entry %d names GPU %d, which the node does not have (GPUs %s)'
                % (where, position, index, ', '.join(str(i) for i in sorted(indexes)))
                for position, entry in enumerate(entries) if entry['devices'] != 'all'
                for index in entry['devices'] if index not in indexes]
    for gpu in sorted(gpus, key=lambda item: item['index']):
        matching = [position for position, entry in enumerate(entries) if _applies(entry, gpu)]
        if len(matching) > 1:
            problems.append('%s: GPU %d is named by entries %s; name each GPU once'
                            % (where, gpu['index'], ' and '.join(str(position) for position in matching)))
            continue
        if not matching:
            continue
        entry = entries[matching[0]]
        devices = dict((name, count) for name, count in (entry.get('mig-devices') or {}).items() if count)
        if entry['mig-enabled']:
            problems += fit_problems(gpu['name'], devices, '%s: GPU %d' % (where, gpu['index']))
        out[gpu['index']] = {'mig_enabled': entry['mig-enabled'], 'devices': devices}
    return out, problems


# ---------------------------------------------------------------------------------------- what nvidia-smi lists

def _listing_rows(text, pattern, what):
    text = text or ''
    if any(marker in text for marker in NOTHING_LISTED):
        return []
    rows = []
    for line in text.splitlines():
        line = line.strip()
        match = pattern.match(line)
        if match:
            rows.append(match.groups())
        elif line and not line.startswith(('+', '|')):
            raise MigListingError('nvidia-smi mig %s printed %r' % (what, line))
    return rows


def parse_gpu_instances(text):
    """The GPU instances that ``nvidia-smi mig -lgi`` lists: [{gpu, profile, profile_id, instance_id, start, size}]."""
    return [{'gpu': int(gpu), 'profile': profile, 'profile_id': int(profile_id), 'instance_id': int(instance_id),
             'start': int(start), 'size': int(size)}
            for gpu, profile, profile_id, instance_id, start, size in _listing_rows(text, LGI_ROW, '-lgi')]


def parse_compute_instances(text):
    """The compute instances that ``nvidia-smi mig -lci`` lists: [{gpu, gpu_instance_id, profile, profile_id,
    instance_id, start, size}]."""
    return [{'gpu': int(gpu), 'gpu_instance_id': int(gi), 'profile': profile, 'profile_id': int(profile_id),
             'instance_id': int(instance_id), 'start': int(start) if start else None, 'size': int(size) if size else None}
            for gpu, gi, profile, profile_id, instance_id, start, size in _listing_rows(text, LCI_ROW, '-lci')]


def observed_layout(gpus, gpu_instances, compute_instances):
    """{GPU index: {mig_enabled, pending, devices, whole}} of the node now: MIG mode from ``gpus`` ([{index,
    mig_mode, mig_mode_pending}]), the count per profile of its GPU instances, and whether each of them has exactly
    one compute instance that spans it (C(whole))."""
    out = {}
    for gpu in gpus:
        instances = [gi for gi in gpu_instances if gi['gpu'] == gpu['index']]
        devices = {}
        for gi in instances:
            devices[gi['profile']] = devices.get(gi['profile'], 0) + 1
        whole = all([ci['profile'] for ci in compute_instances
                     if ci['gpu'] == gpu['index'] and ci['gpu_instance_id'] == gi['instance_id']] == [gi['profile']]
                    for gi in instances)
        out[gpu['index']] = {'mig_enabled': _enabled(gpu.get('mig_mode')),
                             'pending': _enabled(gpu.get('mig_mode_pending', gpu.get('mig_mode'))),
                             'devices': devices, 'whole': whole,
                             'compute_instances': len([ci for ci in compute_instances if ci['gpu'] == gpu['index']])}
    return out


def _enabled(mode):
    return str(mode).strip().lower() == 'enabled'


# ---------------------------------------------------------------------------------------------------- the plan

def _smi(nvidia_smi, *args):
    return [nvidia_smi] + [str(arg) for arg in args]


def gpu_steps(index, gpu_name, wanted, observed, nvidia_smi='nvidia-smi'):
    """The nvidia-smi commands that take GPU ``index`` from ``observed`` to ``wanted`` (both {mig_enabled, devices}),
    in order: destroy what it holds, set the MIG mode, create the GPU instances with their compute instance; [] when
    it already holds the layout."""
    same_mode = observed['mig_enabled'] == wanted['mig_enabled'] and observed.get('pending', observed['mig_enabled']) == wanted['mig_enabled']
    holds = observed['devices'] == wanted['devices'] and observed.get('whole', True)
    if same_mode and (not wanted['mig_enabled'] or holds):
        return []
    steps = []
    if observed['mig_enabled'] and observed.get('compute_instances'):
        steps.append(_smi(nvidia_smi, 'mig', '-i', index, '-dci'))
    if observed['mig_enabled'] and observed['devices']:
        steps.append(_smi(nvidia_smi, 'mig', '-i', index, '-dgi'))
    if not same_mode:
        steps.append(_smi(nvidia_smi, '-i', index, '-mig', 1 if wanted['mig_enabled'] else 0))
    if wanted['mig_enabled'] and wanted['devices']:
        _model, names = model_of(gpu_name)
        order = placements(names, wanted['devices']) or []
        steps.append(_smi(nvidia_smi, 'mig', '-i', index, '-cgi', ','.join(str(item[1]) for item in order), '-C'))
    return steps


def layout_plan(wanted, observed, gpu_names, nvidia_smi='nvidia-smi'):
    """[{gpu, name, before, after, steps}] for each GPU whose layout must change (GPU index order)."""
    plan = []
    for index in sorted(wanted):
        before = observed.get(index)
        if before is None:
            continue
        steps = gpu_steps(index, gpu_names.get(index, ''), wanted[index], before, nvidia_smi)
        if steps:
            plan.append({'gpu': index, 'name': gpu_names.get(index, ''), 'before': summary(before),
                         'after': summary(wanted[index]), 'steps': steps})
    return plan


def summary(layout):
    """'MIG on: 1 x 3g.40gb, 2 x 1g.10gb' or 'MIG off' for a {mig_enabled, devices} layout, with the MIG mode that waits
    for a GPU reset (C(pending)) when there is one."""
    waiting = ''
    if layout.get('pending', layout['mig_enabled']) != layout['mig_enabled']:
        waiting = ' (MIG %s once the GPU is reset)' % ('on' if layout['pending'] else 'off')
    if not layout['mig_enabled']:
        return 'MIG off' + waiting
    partial = '' if layout.get('whole', True) else ' (compute instances that do not span their GPU instance)'
    return 'MIG on: %s%s%s' % (describe(layout['devices']), partial, waiting)


def _quoted(argument):
    return "'%s'" % str(argument).replace("'", "'\\''")


def apply_script(plan):
    """A POSIX shell script that runs the plan's commands in order, printing each before it runs, and stops at the first
    that fails (a GPU instance cannot be destroyed while its compute instance is, nor created before the mode is set)."""
    lines = ['set -e']
    for item in plan:
        for step in item['steps']:
            command = ' '.join(_quoted(argument) for argument in step)
            lines += ['echo %s' % _quoted('+ ' + ' '.join(step)), command]
    return '\n'.join(lines) + '\n'


def parse_gpus(text):
    """The GPUs of ``nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current,mig.mode.pending
    --format=csv,noheader``: [{index, name, pci_device_id, mig_mode, mig_mode_pending}]."""
    gpus = []
    for line in (text or '').splitlines():
        fields = [field.strip() for field in line.split(',')]
        if len(fields) != 5 or not fields[0].isdigit():
            raise MigListingError('nvidia-smi --query-gpu printed %r' % line.strip())
        gpus.append({'index': int(fields[0]), 'name': fields[1], 'pci_device_id': fields[2],
                     'mig_mode': fields[3], 'mig_mode_pending': fields[4]})
    return gpus


def turns_mig_on(document, selected):
    """Whether layout ``selected`` of ``document`` turns MIG on for any GPU (False for no layout)."""
    configs = document.get('mig-configs') if isinstance(document, dict) else None
    entries = configs.get(selected) if isinstance(configs, dict) and selected else None
    return any(isinstance(entry, dict) and entry.get('mig-enabled') is True for entry in entries or [])


def pool_problems(replicas, document, selected, where):
    """A node in a time-slicing pool (``replicas`` above 0) whose MIG layout ``selected`` turns MIG on: time-slicing
    (development) and MIG (multi-tenant production) pools are separate node groups."""
    if not turns_mig_on(document, selected) or not str(replicas).isdigit() or int(replicas) == 0:
        return []
    return ["%s is in a time-slicing pool (gpu_node_join_time_slicing_replicas=%s) and in a MIG pool (its layout '%s' "
            'turns MIG on): time-slicing pools and MIG pools are separate node groups. Give the node one of them: '
            'gpu_node_join_time_slicing_replicas=0, or a layout without MIG.' % (where, replicas, selected)]


def strategy_problems(strategy, wanted, where):
    """A layout the device plugin's MIG strategy cannot serve: C(none) advertises whole GPUs only, C(single) needs every
    GPU of the node under MIG with one profile; C(mixed) serves any layout."""
    enabled = [layout for layout in wanted.values() if layout['mig_enabled']]
    if strategy == 'none' and enabled:
        return ['%s: the layout turns MIG on, but the device plugin runs with MIG strategy none (gpu_node_join_mig_strategy), '
                'which does not advertise MIG devices: set it to mixed, or single when every GPU holds one profile' % where]
    if strategy == 'single':
        profiles = set(name for layout in enabled for name in layout['devices'])
        if len(enabled) != len(wanted) or len(profiles) > 1:
            return ['%s: MIG strategy single (gpu_node_join_mig_strategy) needs every GPU of the node under MIG with one '
                    'profile; the layout has %s: use mixed' % (where, '; '.join(
                        'GPU %s %s' % (index, summary(layout)) for index, layout in sorted(wanted.items())))]
    return []


def node_plan(reads, document, selected, where, nvidia_smi='nvidia-smi'):
    """What the node's GPUs hold, what layout ``selected`` of ``document`` wants of them, and the commands between.

    ``reads``: the stdout of nvidia-smi's C(--query-gpu) (see parse_gpus), C(mig -lgi) and C(mig -lci) as C(gpus),
    C(gpu_instances) and C(compute_instances). Returns {problems, wanted, observed, plan, pending}: C(wanted) and
    C(observed) summarise each GPU (index as text), C(pending) lists the GPUs whose MIG mode waits for a reset."""
    try:
        gpus = parse_gpus(reads['gpus'])
        gpu_instances = parse_gpu_instances(reads['gpu_instances'])
        compute_instances = parse_compute_instances(reads['compute_instances'])
    except MigListingError as error:
        return {'problems': ['%s: %s' % (where, error)], 'wanted': {}, 'wanted_layout': {}, 'observed': {},
                'observed_layout': {}, 'plan': [], 'pending': [], 'differences': [], 'script': ''}
    observed = observed_layout(gpus, gpu_instances, compute_instances)
    wanted, problems = wanted_layout(document, selected, gpus, where)
    names = dict((gpu['index'], gpu['name']) for gpu in gpus)
    plan = [] if problems else layout_plan(wanted, observed, names, nvidia_smi)
    return {
        'problems': problems,
        'wanted': dict((str(index), summary(layout)) for index, layout in wanted.items()),
        'wanted_layout': dict((str(index), layout) for index, layout in wanted.items()),
        'observed': dict((str(index), summary(layout)) for index, layout in observed.items()),
        'observed_layout': dict((str(index), layout) for index, layout in observed.items()),
        'plan': plan,
        'pending': [index for index, layout in sorted(observed.items()) if layout['pending'] != layout['mig_enabled']],
        'differences': ['GPU %d holds %s, its layout is %s' % (item['gpu'], item['before'], item['after']) for item in plan],
        'script': apply_script(plan),
    }


CHECK_ID = 'mig_layout_held'


def _check(status, message, remedy=''):
    return {'id': CHECK_ID, 'layer': 'gpu', 'status': status, 'message': message, 'remedy': remedy}


def _output(command):
    return (command or {}).get('stdout', '') + (command or {}).get('stderr', '')


def host_check(commands, document, selected, where):
    """check.yml's check C(mig_layout_held) of the host layer (part C(gpu)): whether every GPU holds its layout, from
    gpu_node_read's C(mig_listing) reads (``commands``: mig_gpus, mig_gpu_instances, mig_compute_instances)."""
    if not selected:
        return _check('skip', 'no MIG layout is set for the node (gpufleet_mig_config)')
    gpus = (commands or {}).get('mig_gpus') or {}
    if gpus.get('rc') != 0:
        return _check('fail', 'the MIG layout could not be read: nvidia-smi --query-gpu exited with %s: %s'
                      % (gpus.get('rc'), _output(gpus).strip()[:300]), 'fix nvidia_smi_runs first')
    reads = {'gpus': gpus.get('stdout', ''), 'gpu_instances': _output(commands.get('mig_gpu_instances')),
             'compute_instances': _output(commands.get('mig_compute_instances'))}
    plan = node_plan(reads, document, selected, where)
    if plan['problems']:
        return _check('fail', '; '.join(plan['problems']),
                      "choose a layout the node's GPUs can hold, with the profiles of their model (docs/mig.md)")
    # A MIG mode set as the layout wants, waiting for a reset: only a reset (or a reboot) finishes it.
    resets = [item['gpu'] for item in plan['plan']
              if plan['observed_layout'][str(item['gpu'])]['pending'] == plan['wanted_layout'][str(item['gpu'])]['mig_enabled']]
    differs = ['GPU %d holds %s, its layout is %s' % (item['gpu'], item['before'], item['after']) for item in plan['plan']]
    if differs:
        remedies = []
        if resets:
            remedies.append('for GPU %s, stop the processes that hold the GPU and reset it (nvidia-smi --gpu-reset), or '
                            'reboot the node, then run upgrade_driver.yml' % ', '.join(str(index) for index in resets))
        if len(resets) < len(differs):
            remedies.append('run upgrade_driver.yml on the node: it gives the GPUs their layout out of service (cordon, '
                            'GPU pods evicted, device plugin paused)')
        return _check('fail', "the GPUs do not hold layout '%s': %s" % (selected, '; '.join(differs)), '; '.join(remedies))
    return _check('pass', "every GPU holds layout '%s': %s" % (selected, '; '.join(
        'GPU %s %s' % (index, plan['observed'][index]) for index in sorted(plan['observed'], key=int))))
