# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers for NVIDIA driver outputs and Linux host files (private to gpufleet.node).

Every parser takes the text (or bytes) it is given and returns plain data. Input that does
not have the expected shape raises NvidiaParseError with a message that names the input and
quotes the offending line, so callers can turn it into a check failure instead of a traceback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import re


class NvidiaParseError(ValueError):
    """Raised when an input does not have the shape its parser expects."""


# Fields the module asks nvidia-smi for, in this order, with --format=csv,noheader,nounits.
QUERY_GPU_FIELDS = (
    'index',
    'name',
    'uuid',
    'pci.bus_id',
    'memory.total',
    'persistence_mode',
    'mig.mode.current',
    'driver_version',
)

_NOT_AVAILABLE = frozenset([
    '', 'n/a', '[n/a]', '[not supported]', 'not supported', '[unknown error]', '[insufficient permissions]',
    '[requested functionality has been deprecated]',
])

_VERSION_RE = re.compile(r'^\d+(?:\.\d+)+$')
_UNIT_SUFFIX_RE = re.compile(r'\s+\[[^\]]+\]$')

# Lines nvidia-smi prints instead of (or between) data lines when it cannot talk to the driver
# or to one GPU. Ordered: the first matching pattern classifies the output.
_SMI_ERROR_PATTERNS = (
    ('driver_library_mismatch', re.compile(r'Driver/library version mismatch', re.I)),
    ('cannot_communicate', re.compile(r"couldn't communicate with the NVIDIA driver", re.I)),
    ('nvml_not_found', re.compile(r"couldn't find libnvidia-ml\.so|NVML Shared Library Not Found", re.I)),
    ('gpu_lost', re.compile(r'GPU is lost', re.I)),
    ('no_devices', re.compile(r'^No devices were found', re.I | re.M)),
    ('insufficient_permissions', re.compile(r'Insufficient Permissions', re.I)),
    # nvidia-smi sees the GPU but cannot open it ("... for GPU0000:91:00.0: Unknown Error"): the usual lost-GPU symptom
    ('gpu_handle_lost', re.compile(r'^Unable to determine the device handle for GPU', re.I | re.M)),
    ('unknown_error', re.compile(r'Unknown Error', re.I)),
    ('nvml_init_failed', re.compile(r'^Failed to initialize NVML', re.I | re.M)),
)

_DEVICE_HANDLE_RE = re.compile(
    r'^Unable to determine the device handle for GPU\s?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(?P<reason>.*)$')
_NVML_VERSION_RE = re.compile(r'^NVML library version:\s*(?P<version>\S+)\s*$', re.M)


def not_available(value):
    """True when a nvidia-smi value means "no value" (N/A, [N/A], [Not Supported], ...)."""
    return value is None or value.strip().lower() in _NOT_AVAILABLE


def normalize_pci(address):
    """Return a PCI address as 'dddd:bb:dd' (lower case, 4-digit domain, no function).

    Accepts nvidia-smi's '00000000:18:00.0', the kernel log's 'PCI:0000:9b:00' and '0000:9b:00.0'.
    Returns None for anything else.
    """
    if not address:
        return None
    text = address.strip()
    if text.upper().startswith('PCI:'):
        text = text[4:]
    match = re.match(r'^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.[0-7])?$', text)
    if not match:
        return None
    domain = int(match.group(1) or '0', 16)
    return '%04x:%02x:%02x' % (domain, int(match.group(2), 16), int(match.group(3), 16))


def _text(value, what):
    if value is None:
        raise NvidiaParseError('%s: no output to parse' % what)
    if isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    return value


def _short(line, limit=160):
    line = line.rstrip('\n')
    return line if len(line) <= limit else line[:limit] + '...'


# --------------------------------------------------------------------------- nvidia-smi


def classify_smi_output(text, rc=0):
    """Classify what nvidia-smi printed when it failed (or printed an error line).

    Returns None when nothing in the output is a known error and rc is 0, else a dict:
    error_class (driver_library_mismatch, cannot_communicate, nvml_not_found, gpu_lost,
    no_devices, insufficient_permissions, gpu_handle_lost, unknown_error, nvml_init_failed, failed),
    message (the first error line), pci_bus_id (for per-GPU handle errors) and nvml_version (when printed).
    A per-GPU 'Unable to determine the device handle' line is gpu_handle_lost unless its reason is
    'GPU is lost' (gpu_lost) or 'Insufficient Permissions'.
    """
    text = _text(text, 'nvidia-smi output')
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = None
    for error_class, pattern in _SMI_ERROR_PATTERNS:
        if pattern.search(text):
            found = error_class
            break
    if found is None and rc == 0:
        return None
    message = ''
    for line in lines:
        if any(pattern.search(line) for dummy, pattern in _SMI_ERROR_PATTERNS) or _DEVICE_HANDLE_RE.match(line):
            message = line
            break
    if not message:
        message = lines[0] if lines else 'nvidia-smi exited with status %s and printed nothing' % rc
    result = {
        'error_class': found or 'failed',
        'message': _short(message, 400),
        'pci_bus_id': None,
        'nvml_version': None,
    }
    for line in lines:
        handle = _DEVICE_HANDLE_RE.match(line)
        if handle:
            result['pci_bus_id'] = handle.group('pci')
            break
    nvml = _NVML_VERSION_RE.search(text)
    if nvml:
        result['nvml_version'] = nvml.group('version')
    return result


def device_handle_errors(text):
    """Return [{'pci_bus_id', 'reason', 'line'}] for 'Unable to determine the device handle' lines."""
    text = _text(text, 'nvidia-smi output')
    errors = []
    for line in text.splitlines():
        match = _DEVICE_HANDLE_RE.match(line.strip())
        if match:
            errors.append({'pci_bus_id': match.group('pci'), 'reason': match.group('reason').strip(), 'line': line.strip()})
    return errors


def parse_query_gpu_csv(text, fields=None):
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output.

    With fields=None the first line is taken as the CSV header (format=csv); units in the
    header ('memory.total [MiB]') are dropped from the keys and from the values ('81559 MiB').
    With fields given, every line is a data row with exactly len(fields) values.
    Per-GPU 'Unable to determine the device handle' lines are skipped (see device_handle_errors).
    Returns a list of dicts keyed by field name, values as strings (None for N/A).
    """
    text = _text(text, 'nvidia-smi --query-gpu output')
    lines = [line for line in text.splitlines() if line.strip() and not _DEVICE_HANDLE_RE.match(line.strip())]
    if not lines:
        raise NvidiaParseError('nvidia-smi --query-gpu output: empty (no GPU rows)')
    units = {}
    if fields is None:
        header = next(csv.reader([lines[0]], skipinitialspace=True))
        fields = []
        for column in header:
            column = column.strip()
            unit = re.search(r'\[([^\]]+)\]$', column)
            name = _UNIT_SUFFIX_RE.sub('', column)
            if unit:
                units[name] = unit.group(1)
            fields.append(name)
        lines = lines[1:]
        if not lines:
            raise NvidiaParseError('nvidia-smi --query-gpu output: header only, no GPU rows')
    fields = list(fields)
    rows = []
    for number, row in enumerate(csv.reader(lines, skipinitialspace=True), start=1):
        if len(row) != len(fields):
            raise NvidiaParseError(
                'nvidia-smi --query-gpu output: row %d has %d values, expected %d (%s): %r'
                % (number, len(row), len(fields), ', '.join(fields), _short(lines[number - 1])))
        record = {}
        for name, value in zip(fields, row):
            value = value.strip()
            unit = units.get(name)
            if unit and value.endswith(' ' + unit):
                value = value[:-len(unit) - 1].strip()
            record[name] = None if not_available(value) else value
        rows.append(record)
    return rows


def _as_int(value, field, row_number):
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise NvidiaParseError('nvidia-smi --query-gpu output: row %d field %s is %r, expected an integer' % (row_number, field, value))


def gpus_from_query(rows):
    """Turn parse_query_gpu_csv rows of QUERY_GPU_FIELDS into the module's GPU records."""
    gpus = []
    for number, row in enumerate(rows, start=1):
        missing = [field for field in ('index', 'name', 'uuid') if not row.get(field)]
        if missing:
            raise NvidiaParseError('nvidia-smi --query-gpu output: row %d has no value for %s' % (number, ', '.join(missing)))
        uuid = row['uuid']
        if not uuid.startswith('GPU-'):
            raise NvidiaParseError('nvidia-smi --query-gpu output: row %d uuid %r does not start with GPU-' % (number, uuid))
        driver = row.get('driver_version')
        if driver is not None and not _VERSION_RE.match(driver):
            raise NvidiaParseError('nvidia-smi --query-gpu output: row %d driver_version %r is not a version' % (number, driver))
        gpus.append({
            'index': _as_int(row['index'], 'index', number),
            'name': row['name'],
            'uuid': uuid,
            'pci_bus_id': row.get('pci.bus_id'),
            'memory_total_mib': _as_int(row.get('memory.total'), 'memory.total', number),
            'persistence_mode': row.get('persistence_mode'),
            'mig_mode': row.get('mig.mode.current'),
            'driver_version': driver,
            'mig_devices': [],
        })
    return gpus


_LIST_GPU_RE = re.compile(r'^GPU\s+(?P<index>\d+):\s+(?P<name>.+?)\s+\(UUID:\s*(?P<uuid>[^)\s]+)\)\s*$')
_LIST_MIG_RE = re.compile(r'^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s+\(UUID:\s*(?P<uuid>[^)\s]+)\)\s*$')


def parse_smi_list(text):
    """Parse `nvidia-smi -L`: [{'index', 'name', 'uuid', 'mig_devices': [{'index', 'profile', 'uuid'}]}]."""
    text = _text(text, 'nvidia-smi -L output')
    gpus = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        gpu = _LIST_GPU_RE.match(line)
        if gpu:
            gpus.append({'index': int(gpu.group('index')), 'name': gpu.group('name'), 'uuid': gpu.group('uuid'), 'mig_devices': []})
            continue
        mig = _LIST_MIG_RE.match(line)
        if mig:
            if not gpus:
                raise NvidiaParseError('nvidia-smi -L output: line %d lists a MIG device before any GPU: %r' % (number, _short(line)))
            gpus[-1]['mig_devices'].append({'index': int(mig.group('index')), 'profile': mig.group('profile'), 'uuid': mig.group('uuid')})
            continue
        raise NvidiaParseError('nvidia-smi -L output: line %d is not a GPU or MIG line: %r' % (number, _short(line)))
    if not gpus:
        raise NvidiaParseError('nvidia-smi -L output: no GPU lines')
    return gpus


_SMI_HEADER_RE = re.compile(
    r'^\|\s*NVIDIA-SMI\s+(?P<smi>\d+(?:\.\d+)+)\s+Driver Version:\s+(?P<driver>\d+(?:\.\d+)+)'
    r'\s+CUDA Version:\s+(?P<cuda>\d+\.\d+|N/A)\s*\|$')


def parse_smi_header(text):
    """The header of plain `nvidia-smi`'s table: {'nvidia_smi_version', 'driver_version', 'cuda_version'}.

    ``cuda_version`` is the highest CUDA version the driver's libcuda supports (major.minor), None where nvidia-smi
    prints N/A."""
    text = _text(text, 'nvidia-smi output')
    for line in text.splitlines():
        header = _SMI_HEADER_RE.match(line.strip())
        if header:
            cuda = header.group('cuda')
            return {'nvidia_smi_version': header.group('smi'), 'driver_version': header.group('driver'),
                    'cuda_version': None if cuda == 'N/A' else cuda}
    raise NvidiaParseError('nvidia-smi output: no "NVIDIA-SMI ... Driver Version: ... CUDA Version: ..." header line')


# --------------------------------------------------------------------------- driver versions

_PROC_VERSION_RE = re.compile(
    r'^NVRM version:\s+NVIDIA UNIX\s+(?:Open Kernel Module for\s+(?P<open_arch>\S+)|(?P<arch>\S+)\s+(?P<open>Open )?Kernel Module)'
    r'\s+(?P<version>\d+(?:\.\d+)+)(?:\s+(?P<rest>.*))?$')


def parse_proc_driver_version(text):
    """Parse /proc/driver/nvidia/version: {'version', 'flavour' (open|proprietary), 'arch', 'gcc'}."""
    text = _text(text, '/proc/driver/nvidia/version')
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise NvidiaParseError('/proc/driver/nvidia/version: empty')
    match = _PROC_VERSION_RE.match(lines[0].rstrip())
    if not match:
        raise NvidiaParseError('/proc/driver/nvidia/version: first line is not an "NVRM version: NVIDIA UNIX ... Kernel Module <version>" line: %r'
                               % _short(lines[0]))
    gcc = None
    for line in lines[1:]:
        if line.startswith('GCC version:'):
            gcc = line.split(':', 1)[1].strip()
    is_open = bool(match.group('open_arch') or match.group('open'))
    return {
        'version': match.group('version'),
        'flavour': 'open' if is_open else 'proprietary',
        'arch': match.group('open_arch') or match.group('arch'),
        'gcc': gcc,
    }


def parse_module_version(text, what='/sys/module/nvidia/version'):
    """Parse a one-line module version file such as /sys/module/nvidia/version."""
    text = _text(text, what).strip()
    if not _VERSION_RE.match(text):
        raise NvidiaParseError('%s: %r is not a version' % (what, _short(text)))
    return text


def version_from_library_name(filename):
    """'libnvidia-ml.so.535.261.03' -> '535.261.03'; None for the .so.1 soname or other names."""
    match = re.match(r'^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$', filename)
    return match.group(1) if match else None


# --------------------------------------------------------------------------- kernel files


def _refcount(field):
    """A /proc/modules use count; None for '-', which a kernel built without CONFIG_MODULE_UNLOAD prints (it cannot count)."""
    return None if field == '-' else int(field)


def _is_refcount(field):
    return field == '-' or field.lstrip('-').isdigit()


def parse_proc_modules(text):
    """Parse /proc/modules (or `lsmod` output): {name: {'size', 'refcount', 'used_by', 'state'}}.

    A kernel without module unloading prints '- -' for the use count and users: refcount is then None."""
    text = _text(text, '/proc/modules')
    modules = {}
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if number == 1 and parts[:2] == ['Module', 'Size']:
            continue
        if len(parts) < 3 or not parts[1].isdigit() or not _is_refcount(parts[2]):
            raise NvidiaParseError('/proc/modules: line %d is not "name size refcount ...": %r' % (number, _short(line)))
        used_by = []
        state = None
        if len(parts) > 3 and parts[3] != '-':
            used_by = [name for name in parts[3].split(',') if name]
        if len(parts) > 4:
            state = parts[4]
        modules[parts[0]] = {'size': int(parts[1]), 'refcount': _refcount(parts[2]), 'used_by': used_by, 'state': state}
    return modules


def parse_proc_devices(text):
    """Parse /proc/devices: {'character': {name: major}, 'block': {name: major}}."""
    text = _text(text, '/proc/devices')
    result = {'character': {}, 'block': {}}
    section = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped == 'Character devices:':
            section = 'character'
            continue
        if stripped == 'Block devices:':
            section = 'block'
            continue
        parts = stripped.split(None, 1)
        if section is None or len(parts) != 2 or not parts[0].isdigit():
            raise NvidiaParseError('/proc/devices: line %d is not "major name" inside a section: %r' % (number, _short(line)))
        result[section].setdefault(parts[1], int(parts[0]))
    if section is None:
        raise NvidiaParseError('/proc/devices: no "Character devices:" section')
    return result


_IOMMU_KEYS = ('intel_iommu', 'amd_iommu', 'iommu', 'iommu.passthrough', 'iommu.strict')


def parse_cmdline(text):
    """Parse /proc/cmdline: {'raw', 'iommu': {key: value} for IOMMU-related parameters}."""
    text = _text(text, '/proc/cmdline').strip()
    params = {}
    for token in text.split():
        if token == '--':
            break
        key, sep, value = token.partition('=')
        if key in _IOMMU_KEYS:
            params[key] = value if sep else True
    return {'raw': text, 'iommu': params}


def parse_secure_boot_efivar(data):
    """Parse the SecureBoot EFI variable file (4 attribute bytes + 1 value byte): True/False."""
    if data is None or len(data) < 5:
        raise NvidiaParseError('SecureBoot EFI variable: expected at least 5 bytes, got %d' % (0 if data is None else len(data)))
    value = data[4] if isinstance(data[4], int) else ord(data[4])
    if value not in (0, 1):
        raise NvidiaParseError('SecureBoot EFI variable: value byte is %d, expected 0 or 1' % value)
    return value == 1


# --------------------------------------------------------------------------- kernel log

_XID_RE = re.compile(
    r'NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):\s*(?P<code>\d+)\s*,\s*(?P<rest>.*)$')
_XID_PROC_RE = re.compile(r"^pid=(?P<pid>'?<unknown>'?|\d+),\s*name=(?P<name>[^,]*),\s*(?P<message>.*)$")

_KMSG_RECORD_RE = re.compile(r'^\d+,\d+,\d+,[^;]*;(.*)$')
_KMSG_ESCAPE_RE = re.compile(r'\\x([0-9a-fA-F]{2})')
_RSYSLOG_ESCAPE_RE = re.compile(r'#(0[0-3][0-7])')
# How a line of a kernel log starts when it carries a log prefix of its own.
_LOG_PREFIX_START_RE = re.compile(
    r'^(?:\[[^\]]*\]'                          # dmesg '[12345.678901]', dmesg -T '[Mon Jan  1 00:00:00 2024]'
    r'|<\d+>'                                  # console log level
    r'|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d'   # syslog and journal 'Jan  1 00:00:00 host kernel:'
    r'|\d{4}-\d\d-\d\d[T ]\d\d:\d\d'           # ISO timestamps (rsyslog, journalctl -o short-iso)
    r'|kern\s*:)')                             # dmesg --decode 'kern  :warn  :'


def _unescape_kmsg(match):
    return chr(int(match.group(1), 16))


def _unescape_rsyslog(match):
    return chr(int(match.group(1), 8))


def _is_kmsg_dictionary(line):
    """A /dev/kmsg dictionary continuation such as ' SUBSYSTEM=pci'."""
    return line.startswith(' ') and '=' in line and 'NVRM' not in line and line.strip().split('=')[0].isupper()


def _kernel_log_pieces(text):
    """Yield (line, new_record) for every non-empty line of a kernel log.

    /dev/kmsg records ('6,123,456,-;message') are reduced to their message with its '\\x0a'-style
    escapes expanded, rsyslog's '#011' and '#012' escapes are expanded; new_record marks the first
    line of a /dev/kmsg record.
    """
    text = _text(text, 'kernel log')
    for raw in text.splitlines():
        record = _KMSG_RECORD_RE.match(raw)
        if record:
            pieces = _KMSG_ESCAPE_RE.sub(_unescape_kmsg, record.group(1)).split('\n')
        elif _is_kmsg_dictionary(raw):
            continue
        else:
            pieces = _RSYSLOG_ESCAPE_RE.sub(_unescape_rsyslog, raw).split('\n')
        for number, piece in enumerate(pieces):
            if piece.strip():
                yield piece, bool(record) and number == 0


def kernel_log_lines(text):
    """Split a kernel log into lines: /dev/kmsg records reduced to their message, the escaped newlines
    of /dev/kmsg ('\\x0a') and rsyslog ('#012') expanded, /dev/kmsg dictionary lines dropped."""
    return [piece[0] for piece in _kernel_log_pieces(text)]


def parse_xid_events(text):
    """Find NVIDIA Xid events in kernel log text (dmesg, dmesg --ctime/--decode, syslog, /dev/kmsg).

    Returns [{'code', 'pci', 'pid', 'process', 'message', 'timestamp'}] in log order, where pci is
    normalized by normalize_pci and timestamp is whatever preceded 'NVRM:' on the line.
    """
    events = []
    for line in kernel_log_lines(text):
        match = _XID_RE.search(line)
        if not match:
            continue
        rest = match.group('rest').strip()
        pid = process = None
        proc = _XID_PROC_RE.match(rest)
        if proc:
            pid = None if 'unknown' in proc.group('pid') else int(proc.group('pid'))
            process = None if proc.group('name').strip() in ('<unknown>', '') else proc.group('name').strip()
            rest = proc.group('message').strip()
        prefix = line[:match.start()].strip()
        events.append({
            'code': int(match.group('code')),
            'pci': normalize_pci(match.group('pci')),
            'pid': pid,
            'process': process,
            'message': rest,
            'timestamp': prefix or None,
        })
    return events


def _continuation(line, report_prefix):
    """The text a line without 'NVRM:' adds to the NVRM report above it, or None when it starts another message.

    A line continues the report when it repeats the report's log prefix (journal, syslog, dmesg) or
    carries no log prefix of its own: dmesg and journalctl indent the continued lines of a record,
    pasted logs lose the indentation, /dev/kmsg and rsyslog escape them into the record's line.
    """
    if report_prefix is None:
        return None
    if report_prefix.strip() and line.startswith(report_prefix):
        return line[len(report_prefix):]
    if _LOG_PREFIX_START_RE.match(line):
        return None
    return line


def _nvrm_text(text):
    """The driver's NVRM messages of a kernel log joined into one line with single spaces.

    The driver's reports wrap over several lines, each continued line with or without its own 'NVRM:'.
    """
    parts = []
    report_prefix = None
    for line, new_record in _kernel_log_pieces(text):
        position = line.find('NVRM:')
        if position >= 0:
            report_prefix = line[:position]
            parts.append(line[position + 5:])
            continue
        addition = None if new_record else _continuation(line, report_prefix)
        if addition is None:
            report_prefix = None
        else:
            parts.append(addition)
    return ' '.join(' '.join(parts).split())


_DRIVER_VERSION = r'\d+(?:\.\d+)+'
# Older drivers: "API mismatch: the client has the version X, but this kernel module has the version Y."
# Newer drivers name the client: "API mismatch: the client 'nvidia-smi' (pid 1234) has the version X, but ..."
_API_MISMATCH_RE = re.compile(
    r"API mismatch: the client (?:'(?P<name>[^']*)' )?(?:\(pid (?P<pid>\d+)\) )?has the version (?P<client>%s),? "
    r"but this kernel module has the version (?P<kernel>%s)" % (_DRIVER_VERSION, _DRIVER_VERSION))


def parse_api_mismatch(text):
    """Find the kernel's 'NVRM: API mismatch' report, the last one, or None.

    Returns {'client' (the client's, that is the user-space, version), 'kernel' (the kernel module's
    version), 'client_name', 'client_pid'}; the name and pid are None where the report does not give them.
    """
    found = None
    for match in _API_MISMATCH_RE.finditer(_nvrm_text(text)):
        found = {
            'client': match.group('client'),
            'kernel': match.group('kernel'),
            'client_name': match.group('name') or None,
            'client_pid': int(match.group('pid')) if match.group('pid') else None,
        }
    return found


_PCI_ADDRESS = r'[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]'
# Older drivers, also at probe time: "The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus ..."
# Newer drivers, with or without an Xid 79 line: "GPU 0000:91:00.0: GPU has fallen off the bus."
_FALLEN_OFF_RE = re.compile(
    r'The NVIDIA GPU (?P<probe>%s) \(PCI ID: [^)]*\) installed in this system has fallen off the bus'
    r'|GPU (?P<runtime>%s): GPU has fallen off the bus' % (_PCI_ADDRESS, _PCI_ADDRESS))


def parse_fallen_off_bus(text):
    """PCI addresses (normalized, in log order) of the GPUs the kernel reported as 'fallen off the bus', Xid line or not."""
    found = []
    for match in _FALLEN_OFF_RE.finditer(_nvrm_text(text)):
        pci = normalize_pci(match.group('probe') or match.group('runtime'))
        if pci not in found:
            found.append(pci)
    return found
