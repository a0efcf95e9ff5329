# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Host-layer facts, checks and the uvm device-node fix behind gpufleet.node.nvidia_gpu_check.

Private to the collection. Every host path is read below host_root, so the same code inspects
the running host ('/'), a host mounted into a container, or the lab's simulated GPU host tree.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import glob
import os
import stat

from ansible_collections.gpufleet.node.plugins.module_utils import _cuda
from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_parsers import (
    QUERY_GPU_FIELDS,
    NvidiaParseError,
    classify_smi_output,
    device_handle_errors,
    gpus_from_query,
    normalize_pci,
    parse_api_mismatch,
    parse_cmdline,
    parse_fallen_off_bus,
    parse_module_version,
    parse_proc_devices,
    parse_proc_driver_version,
    parse_proc_modules,
    parse_query_gpu_csv,
    parse_secure_boot_efivar,
    parse_smi_header,
    parse_smi_list,
    parse_xid_events,
    version_from_library_name,
)

NVIDIA_MODULES = ('nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm', 'nvidia_peermem')
DEFAULT_REQUIRED_MODULES = ['nvidia', 'nvidia_uvm']
DEFAULT_CRITICAL_XIDS = [48, 64, 74, 79, 95, 119, 120]
XID_FALLEN_OFF_BUS = 79
NV_MAJOR = 195
NV_CTL_MINOR = 255
UVM_NODES = (('nvidia-uvm', 0), ('nvidia-uvm-tools', 1))
UVM_NODE_MODE = 0o666
SECURE_BOOT_VAR = 'sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'
LIBRARY_DIRS = (
    'usr/lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu/nvidia/current', 'usr/lib/aarch64-linux-gnu',
    'usr/lib/aarch64-linux-gnu/nvidia/current', 'usr/lib64', 'usr/lib', 'usr/lib/nvidia', 'lib64',
)
KERNEL_LOG_FILES = ('dev/kmsg', 'var/log/kern.log')
MAX_XID_EVENTS = 100
MAX_KMSG_RECORDS = 200000

XID_DESCRIPTIONS = {
    13: 'graphics engine exception (usually an application fault)',
    31: 'GPU memory page fault (usually an application fault)',
    32: 'invalid or corrupted push buffer stream',
    43: 'GPU stopped processing (usually an application fault)',
    45: 'preemptive cleanup after previous errors',
    48: 'double-bit (uncorrectable) ECC error',
    61: 'internal micro-controller breakpoint/warning',
    62: 'internal micro-controller halt',
    63: 'ECC page retirement or row remapping recording event',
    64: 'ECC page retirement or row remapper recording failure',
    74: 'NVLink error',
    79: 'GPU has fallen off the bus',
    92: 'high single-bit ECC error rate',
    94: 'contained ECC error',
    95: 'uncontained ECC error',
    109: 'context switch timeout',
    119: 'GSP RPC timeout',
    120: 'GSP error',
}

CHECK_LAYERS = {
    'driver_module_loaded': 'kernel',
    'uvm_module_loaded': 'kernel',
    'required_modules_loaded': 'kernel',
    'device_nodes_present': 'kernel',
    'dev_char_symlinks_present': 'kernel',
    'nvidia_smi_runs': 'driver',
    'driver_versions_match': 'driver',
    'driver_version_expected': 'driver',
    'cuda_supported': 'driver',
    'gpu_count_expected': 'gpu',
    'mig_mode_expected': 'gpu',
    'critical_xids_absent': 'gpu',
}
CHECK_IDS = tuple(CHECK_LAYERS)


class HostTree:
    """Reads host files below host_root."""

    def __init__(self, host_root='/'):
        self.root = host_root or '/'

    def path(self, relative):
        return os.path.join(self.root, relative.lstrip('/'))

    def display(self, relative):
        """How a path is shown in messages: the host's absolute path, with host_root when not '/'."""
        path = '/' + relative.lstrip('/')
        if os.path.normpath(self.root) == '/':
            return path
        return '%s (under host_root %s)' % (path, self.root)

    def read_text(self, relative):
        """Return the file's text, or None when it does not exist. Other errors raise OSError/IOError."""
        try:
            with open(self.path(relative), 'rb') as handle:
                return handle.read().decode('utf-8', 'replace')
        except (IOError, OSError) as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise

    def read_bytes(self, relative):
        try:
            with open(self.path(relative), 'rb') as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise


def _read(tree, relative, problems):
    try:
        return tree.read_text(relative)
    except (IOError, OSError) as exc:
        problems.append('%s: %s' % (tree.display(relative), exc.strerror or exc))
        return None


def read_kernel_log(tree):
    """Return (text, source) of the kernel log: /dev/kmsg (records) or /var/log/kern.log; (None, reason) if unreadable."""
    reasons = []
    for relative in KERNEL_LOG_FILES:
        path = tree.path(relative)
        try:
            info = os.stat(path)
        except OSError as exc:
            reasons.append('%s: %s' % (tree.display(relative), exc.strerror))
            continue
        try:
            if stat.S_ISCHR(info.st_mode):
                return _read_kmsg(path), tree.display(relative)
            return tree.read_text(relative), tree.display(relative)
        except (IOError, OSError) as exc:
            reasons.append('%s: %s' % (tree.display(relative), exc.strerror or exc))
    return None, '; '.join(reasons)


def _read_kmsg(path):
    """Read every record currently in the kernel ring buffer from a /dev/kmsg character device."""
    records = []
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        for dummy in range(MAX_KMSG_RECORDS):
            try:
                chunk = os.read(fd, 16384)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                if exc.errno == errno.EPIPE:  # record overwritten while reading: go on
                    continue
                raise
            if not chunk:
                break
            records.append(chunk.decode('utf-8', 'replace'))
    finally:
        os.close(fd)
    return ''.join(records)


def find_nvml_libraries(tree):
    """Versions of libnvidia-ml.so.<version> files found in the usual library directories."""
    versions = []
    for directory in LIBRARY_DIRS:
        for path in sorted(glob.glob(os.path.join(tree.path(directory), 'libnvidia-ml.so.*'))):
            version = version_from_library_name(os.path.basename(path))
            if version and version not in versions:
                versions.append(version)
    return versions


def stat_node(tree, name):
    """Facts about /dev/<name> below host_root."""
    relative = 'dev/' + name
    path = tree.path(relative)
    record = {'path': '/dev/' + name, 'present': False, 'char_device': False, 'major': None, 'minor': None,
              'mode': None, 'uid': None, 'gid': None, 'char_link': False}
    try:
        info = os.lstat(path)
    except OSError:
        return record
    record['present'] = True
    record['mode'] = '%04o' % stat.S_IMODE(info.st_mode)
    record['uid'] = info.st_uid
    record['gid'] = info.st_gid
    if stat.S_ISCHR(info.st_mode):
        major = os.major(info.st_rdev)
        minor = os.minor(info.st_rdev)
        record.update(char_device=True, major=major, minor=minor)
        link = tree.path('dev/char/%d:%d' % (major, minor))
        try:
            target = os.stat(link)
            record['char_link'] = os.path.islink(link) and target.st_ino == info.st_ino
        except OSError:
            record['char_link'] = False
    return record


class Gatherer:
    """Collects every host-layer fact (one nvidia-smi call, a second only when MIG is enabled, and one more for the
    CUDA version when ``read_cuda``: plain nvidia-smi's header is the only place it prints it)."""

    def __init__(self, runner, host_root='/', nvidia_smi_path=None, read_cuda=False):
        self.runner = runner
        self.tree = HostTree(host_root)
        self.nvidia_smi_path = nvidia_smi_path or 'nvidia-smi'
        self.read_cuda = read_cuda

    def gather(self):
        problems = []
        facts = {'host_root': self.tree.root}
        facts['kernel'] = self._kernel(problems)
        modules, devices = self._modules_and_devices(problems)
        facts['modules'] = dict((name, name in modules) for name in NVIDIA_MODULES)
        facts['uvm_major'] = devices.get('nvidia-uvm') if devices is not None else None
        facts['driver'] = self._kernel_driver(problems)
        facts['nvidia_smi'], facts['gpus'] = self._nvidia_smi()
        facts['gpu_count'] = len(facts['gpus']) if (facts['nvidia_smi']['ok'] or facts['gpus']) else None
        facts['driver']['nvml_library_versions'] = find_nvml_libraries(self.tree)
        self._cuda_version(facts)
        self._userspace_version(facts)
        facts['device_nodes'] = self._device_nodes(facts)
        facts['kernel_log'], facts['xid_events'] = self._kernel_log(facts)
        facts['read_errors'] = problems
        return facts

    # -- pieces ----------------------------------------------------------------------------

    def _kernel(self, problems):
        release = _read(self.tree, 'proc/sys/kernel/osrelease', problems)
        if release is None and os.path.normpath(self.tree.root) == '/':
            release = os.uname()[2]
        cmdline_text = _read(self.tree, 'proc/cmdline', problems)
        cmdline = parse_cmdline(cmdline_text) if cmdline_text is not None else {'raw': None, 'iommu': {}}
        kernel = {'release': release.strip() if release else None, 'cmdline': cmdline['raw'], 'iommu': cmdline['iommu'],
                  'efi': os.path.isdir(self.tree.path('sys/firmware/efi')), 'secure_boot': None}
        try:
            data = self.tree.read_bytes(SECURE_BOOT_VAR)
            if data is not None:
                kernel['secure_boot'] = parse_secure_boot_efivar(data)
            elif not kernel['efi']:
                kernel['secure_boot'] = False
        except (IOError, OSError, NvidiaParseError) as exc:
            problems.append('Secure Boot state: %s' % exc)
        return kernel

    def _modules_and_devices(self, problems):
        modules = {}
        text = _read(self.tree, 'proc/modules', problems)
        if text is None:
            problems.append('%s: not found' % self.tree.display('proc/modules'))
        else:
            try:
                modules = parse_proc_modules(text)
            except NvidiaParseError as exc:
                problems.append(str(exc))
        devices = None
        text = _read(self.tree, 'proc/devices', problems)
        if text is not None:
            try:
                devices = parse_proc_devices(text)['character']
            except NvidiaParseError as exc:
                problems.append(str(exc))
        self.loaded_modules = modules
        return modules, devices

    def _kernel_driver(self, problems):
        driver = {'kernel_module_version': None, 'kernel_module_version_source': None, 'kernel_module_flavour': None,
                  'userspace_version': None, 'userspace_version_source': None}
        text = _read(self.tree, 'proc/driver/nvidia/version', problems)
        if text is not None:
            try:
                parsed = parse_proc_driver_version(text)
                driver['kernel_module_version'] = parsed['version']
                driver['kernel_module_version_source'] = '/proc/driver/nvidia/version'
                driver['kernel_module_flavour'] = parsed['flavour']
            except NvidiaParseError as exc:
                problems.append(str(exc))
        if driver['kernel_module_version'] is None:
            text = _read(self.tree, 'sys/module/nvidia/version', problems)
            if text is not None:
                try:
                    driver['kernel_module_version'] = parse_module_version(text)
                    driver['kernel_module_version_source'] = '/sys/module/nvidia/version'
                except NvidiaParseError as exc:
                    problems.append(str(exc))
        return driver

    def _nvidia_smi(self):
        smi = {'path': self.nvidia_smi_path, 'ok': False, 'rc': None, 'error_class': None, 'error_message': None,
               'nvml_version': None, 'gpu_errors': [], 'output': None}
        result = self.runner.run([self.nvidia_smi_path, '--query-gpu=' + ','.join(QUERY_GPU_FIELDS), '--format=csv,noheader,nounits'])
        smi['rc'] = result.rc
        if result.not_found:
            smi.update(error_class='not_found', error_message=result.stderr)
            return smi, []
        if result.timed_out:
            smi.update(error_class='timeout', error_message='nvidia-smi did not answer within %s seconds' % self.runner.timeout)
            return smi, []
        output = result.output
        smi['output'] = output[-2000:]
        smi['gpu_errors'] = device_handle_errors(output)
        classified = classify_smi_output(output, result.rc)
        if classified is not None:
            smi.update(error_class=classified['error_class'], error_message=classified['message'], nvml_version=classified['nvml_version'])
        rows = '\n'.join(line for line in result.stdout.splitlines() if line.strip() and classify_smi_output(line) is None)
        gpus = []
        if rows or classified is None:
            try:
                gpus = gpus_from_query(parse_query_gpu_csv(rows, QUERY_GPU_FIELDS))
            except NvidiaParseError as exc:
                if classified is None:
                    smi.update(error_class='malformed_output', error_message=str(exc))
                return smi, []
        if any(gpu['mig_mode'] == 'Enabled' for gpu in gpus):
            listing = self.runner.run([self.nvidia_smi_path, '-L'])
            try:
                if not listing.ok:
                    raise NvidiaParseError('nvidia-smi -L exited with %s: %s' % (listing.rc, listing.output.strip()[:300]))
                by_uuid = dict((gpu['uuid'], gpu) for gpu in parse_smi_list(listing.stdout))
                for gpu in gpus:
                    gpu['mig_devices'] = by_uuid.get(gpu['uuid'], {}).get('mig_devices', [])
            except NvidiaParseError as exc:
                if smi['error_class'] is None:
                    smi.update(error_class='malformed_output', error_message=str(exc))
        smi['ok'] = smi['error_class'] is None
        return smi, gpus

    def _cuda_version(self, facts):
        driver = facts['driver']
        driver.update(cuda_version=None, cuda_version_source=None, cuda_version_error=None)
        if not self.read_cuda:
            return
        if not facts['nvidia_smi']['ok']:
            driver['cuda_version_error'] = 'nvidia-smi failed'
            return
        table = self.runner.run([self.nvidia_smi_path])
        try:
            if not table.ok:
                raise NvidiaParseError('nvidia-smi exited with %s: %s' % (table.rc, table.output.strip()[:300]))
            driver['cuda_version'] = parse_smi_header(table.stdout)['cuda_version']
            driver['cuda_version_source'] = 'nvidia-smi'
            if driver['cuda_version'] is None:
                driver['cuda_version_error'] = 'nvidia-smi prints CUDA Version: N/A'
        except NvidiaParseError as exc:
            driver['cuda_version_error'] = str(exc)

    def _userspace_version(self, facts):
        driver = facts['driver']
        versions = sorted(set(gpu['driver_version'] for gpu in facts['gpus'] if gpu.get('driver_version')))
        if versions:
            driver['userspace_version'] = versions[-1]
            driver['userspace_version_source'] = 'nvidia-smi'
        elif driver['nvml_library_versions']:
            driver['userspace_version'] = sorted(driver['nvml_library_versions'], key=_version_key)[-1]
            driver['userspace_version_source'] = 'libnvidia-ml'

    def _device_nodes(self, facts):
        names = ['nvidiactl']
        count = facts['gpu_count']
        if count is None:
            # nvidia-smi could not count the GPUs: report the /dev/nvidiaN nodes that exist.
            try:
                entries = os.listdir(self.tree.path('dev'))
            except OSError:
                entries = []
            numbered = sorted(int(entry[6:]) for entry in entries if entry.startswith('nvidia') and entry[6:].isdigit())
            names.extend('nvidia%d' % number for number in numbered)
        else:
            names.extend('nvidia%d' % number for number in range(count))
        names.extend(name for name, dummy in UVM_NODES)
        return dict((name, stat_node(self.tree, name)) for name in names)

    def _kernel_log(self, facts):
        text, source = read_kernel_log(self.tree)
        log = {'readable': text is not None, 'source': source if text is not None else None,
               'error': None if text is not None else source, 'api_mismatch': None, 'fallen_off_bus': []}
        if text is None:
            return log, []
        events = parse_xid_events(text)
        by_pci = dict((normalize_pci(gpu.get('pci_bus_id')), gpu['index']) for gpu in facts['gpus'] if gpu.get('pci_bus_id'))
        for event in events:
            event['gpu_index'] = by_pci.get(event['pci'])
        log['api_mismatch'] = parse_api_mismatch(text)
        log['fallen_off_bus'] = parse_fallen_off_bus(text)
        return log, events[-MAX_XID_EVENTS:]


def _version_key(version):
    return tuple(int(part) if part.isdigit() else 0 for part in version.split('.'))


# ------------------------------------------------------------------------------------ fix


class UvmNodeFixer:
    """Loads nvidia_uvm and creates /dev/nvidia-uvm and /dev/nvidia-uvm-tools below host_root the way
    `nvidia-modprobe -u -c=0` does: major from /proc/devices ('nvidia-uvm'), minors 0 and 1, mode
    0666, owner root:root, plus the /dev/char/<major>:<minor> symlinks when /dev/char exists."""

    def __init__(self, runner, tree, check_mode):
        self.runner = runner
        self.tree = tree
        self.check_mode = check_mode
        self.actions = []
        self.errors = []
        self.before = []
        self.after = []

    def run(self, facts):
        changed = False
        if not facts['modules'].get('nvidia_uvm'):
            self.before.append('module nvidia_uvm: not loaded')
            self.after.append('module nvidia_uvm: loaded')
            changed = True
            self.actions.append('load kernel module nvidia_uvm')
            if not self.check_mode:
                argv = ['modprobe']
                if os.path.normpath(self.tree.root) != '/':
                    argv += ['-d', self.tree.root]
                result = self.runner.run(argv + ['nvidia_uvm'])
                if not result.ok:
                    self.errors.append('modprobe nvidia_uvm failed (rc %s): %s' % (result.rc, result.output.strip()[:400]))
                    return False
        major = self._uvm_major(facts)
        if major is None:
            if self.check_mode and changed:
                for name, minor in UVM_NODES:
                    if not facts['device_nodes'].get(name, {}).get('present'):
                        self.actions.append('create /dev/%s (major known once nvidia_uvm is loaded), minor %d' % (name, minor))
                return changed
            self.errors.append('no "nvidia-uvm" character device in %s: cannot create /dev/nvidia-uvm nodes'
                               % self.tree.display('proc/devices'))
            return changed
        for name, minor in UVM_NODES:
            changed = self._ensure_node(name, major, minor) or changed
        return changed

    def _uvm_major(self, facts):
        if not self.check_mode or facts['modules'].get('nvidia_uvm'):
            try:
                text = self.tree.read_text('proc/devices')
                return parse_proc_devices(text or '').get('character', {}).get('nvidia-uvm')
            except (IOError, OSError, NvidiaParseError):
                return None
        return facts.get('uvm_major')

    def _ensure_node(self, name, major, minor):
        path = self.tree.path('dev/' + name)
        wanted = os.makedev(major, minor)
        changed = False
        try:
            info = os.lstat(path)
        except OSError:
            info = None
        if info is not None and not (stat.S_ISCHR(info.st_mode) and info.st_rdev == wanted):
            kind = 'character device %d:%d' % (os.major(info.st_rdev), os.minor(info.st_rdev)) if stat.S_ISCHR(info.st_mode) else 'not a character device'
            self.before.append('/dev/%s: %s' % (name, kind))
            self.after.append('/dev/%s: character device %d:%d mode 0666 root:root' % (name, major, minor))
            self.actions.append('replace /dev/%s (%s)' % (name, kind))
            changed = True
            if not self.check_mode:
                try:
                    os.remove(path)
                except OSError as exc:
                    self.errors.append('cannot remove %s: %s' % (path, exc.strerror))
                    return changed
            info = None
        if info is None:
            if not changed:
                self.before.append('/dev/%s: absent' % name)
                self.after.append('/dev/%s: character device %d:%d mode 0666 root:root' % (name, major, minor))
                self.actions.append('create /dev/%s c %d %d' % (name, major, minor))
            changed = True
            if not self.check_mode:
                try:
                    os.mknod(path, stat.S_IFCHR | UVM_NODE_MODE, wanted)
                except OSError as exc:
                    self.errors.append('mknod %s c %d %d failed: %s' % (path, major, minor, exc.strerror))
                    return changed
        elif stat.S_IMODE(info.st_mode) != UVM_NODE_MODE or info.st_uid != 0 or info.st_gid != 0:
            self.before.append('/dev/%s: mode %04o owner %d:%d' % (name, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid))
            self.after.append('/dev/%s: mode 0666 owner 0:0' % name)
            self.actions.append('set mode 0666 and owner root:root on /dev/%s' % name)
            changed = True
        if not self.check_mode and changed:
            try:
                os.chmod(path, UVM_NODE_MODE)
                os.chown(path, 0, 0)
            except OSError as exc:
                self.errors.append('cannot set mode/owner of %s: %s' % (path, exc.strerror))
        changed = self._ensure_char_link(name, major, minor) or changed
        return changed

    def _ensure_char_link(self, name, major, minor):
        char_dir = self.tree.path('dev/char')
        if not os.path.isdir(char_dir):
            return False
        link = os.path.join(char_dir, '%d:%d' % (major, minor))
        target = '../' + name
        if os.path.islink(link) and os.readlink(link) == target:
            return False
        self.before.append('/dev/char/%d:%d: %s' % (major, minor, ('-> ' + os.readlink(link)) if os.path.islink(link) else 'absent'))
        self.after.append('/dev/char/%d:%d: -> %s' % (major, minor, target))
        self.actions.append('link /dev/char/%d:%d -> %s' % (major, minor, target))
        if not self.check_mode:
            try:
                if os.path.lexists(link):
                    os.remove(link)
                os.symlink(target, link)
            except OSError as exc:
                self.errors.append('cannot create symlink %s: %s' % (link, exc.strerror))
        return True


# --------------------------------------------------------------------------------- checks


def _check(check_id, status, message, remedy=None):
    return {'id': check_id, 'layer': CHECK_LAYERS[check_id], 'status': status, 'message': message, 'remedy': remedy or ''}


def host_report(facts, params):
    """What both modules return for the host layer: the checks on the facts, the failed ones, and the facts."""
    checks = evaluate(facts, params)
    failed = [check for check in checks if check['status'] == 'fail']
    return {
        'checks': checks,
        'failed_checks': [check['id'] for check in failed],
        'failed_layers': sorted(set(check['layer'] for check in failed), key=['kernel', 'driver', 'gpu'].index),
        'nvidia_gpu': facts,
    }


def evaluate(facts, params):
    """Evaluate every check on gathered facts. params: the module's options."""
    required = params.get('required_modules')
    if required is None:
        required = DEFAULT_REQUIRED_MODULES
    critical = params.get('critical_xids')
    if critical is None:
        critical = DEFAULT_CRITICAL_XIDS
    checks = [
        _check_driver_module(facts),
        _check_uvm_module(facts, required),
        _check_required_modules(facts, required),
        _check_device_nodes(facts),
        _check_char_links(facts),
        _check_nvidia_smi(facts),
        _check_versions_match(facts),
        _check_expected_version(facts, params.get('expected_driver_version')),
        _check_cuda(facts, params.get('cuda_versions') or [], params.get('cuda_forward_compat')),
        _check_gpu_count(facts, params.get('expected_gpu_count')),
        _check_mig_mode(facts, params.get('expected_mig_mode')),
        _check_xids(facts, critical),
    ]
    return checks


def _check_driver_module(facts):
    if facts['modules'].get('nvidia'):
        version = facts['driver']['kernel_module_version']
        return _check('driver_module_loaded', 'pass', 'kernel module nvidia is loaded%s' % (' (version %s)' % version if version else ''))
    problems = [problem for problem in facts['read_errors'] if 'proc/modules' in problem]
    detail = ' (%s)' % '; '.join(problems) if problems else ''
    return _check('driver_module_loaded', 'fail', 'kernel module nvidia is not loaded%s' % detail,
                  'load the driver: `modprobe nvidia` (check `dmesg | grep NVRM` for why it did not load: missing DKMS build for kernel %s, '
                  'Secure Boot rejecting an unsigned module, nouveau holding the GPU)' % (facts['kernel']['release'] or '?'))


def _check_uvm_module(facts, required):
    if facts['modules'].get('nvidia_uvm'):
        return _check('uvm_module_loaded', 'pass', 'kernel module nvidia_uvm is loaded')
    status = 'fail' if 'nvidia_uvm' in required else 'warn'
    return _check('uvm_module_loaded', status, 'kernel module nvidia_uvm is not loaded: CUDA applications and containers cannot start',
                  'run `nvidia-modprobe -u -c=0` (or `modprobe nvidia_uvm`); list nvidia-uvm in a file under /etc/modules-load.d/ '
                  'so it loads at boot (or use fix_device_nodes=true)')


def _check_required_modules(facts, required):
    others = [name for name in required if name not in ('nvidia', 'nvidia_uvm')]
    if not others:
        return _check('required_modules_loaded', 'skip', 'no modules required beyond nvidia and nvidia_uvm')
    missing = [name for name in others if not facts['modules'].get(name)]
    if not missing:
        return _check('required_modules_loaded', 'pass', 'required kernel modules loaded: %s' % ', '.join(others))
    return _check('required_modules_loaded', 'fail', 'required kernel modules not loaded: %s' % ', '.join(missing),
                  'load them: %s; add them to /etc/modules-load.d/ so they load at boot'
                  % '; '.join('`modprobe %s`' % name for name in missing))


def _check_device_nodes(facts):
    nodes = facts['device_nodes']
    uvm_major = facts.get('uvm_major')
    problems = []
    for name in sorted(nodes, key=_node_order):
        node = nodes[name]
        if not node['present']:
            problems.append('%s is missing' % node['path'])
        elif not node['char_device']:
            problems.append('%s is not a character device' % node['path'])
        elif name.startswith('nvidia-uvm'):
            if uvm_major is not None and node['major'] != uvm_major:
                problems.append('%s has major %d but /proc/devices gives nvidia-uvm major %d' % (node['path'], node['major'], uvm_major))
        elif node['major'] != NV_MAJOR:
            problems.append('%s has major %d, expected %d' % (node['path'], node['major'], NV_MAJOR))
    if not problems:
        return _check('device_nodes_present', 'pass', 'device nodes present: %s' % ', '.join(nodes[name]['path'] for name in sorted(nodes, key=_node_order)))
    uvm_missing = any(name.startswith('nvidia-uvm') and not nodes[name]['present'] for name in nodes)
    other_missing = any(not name.startswith('nvidia-uvm') and not (nodes[name]['present'] and nodes[name]['char_device']) for name in nodes)
    remedies = []
    if uvm_missing:
        remedies.append('run `nvidia-modprobe -u -c=0` (or this module with fix_device_nodes=true) to create /dev/nvidia-uvm and /dev/nvidia-uvm-tools')
    if other_missing:
        remedies.append('load the driver and create the GPU nodes: `nvidia-modprobe -c=<minor>` per GPU, or enable nvidia-persistenced '
                        '(its start creates them); check `nvidia-smi` first')
    if not remedies:
        remedies.append('remove the wrong files and recreate them with `nvidia-modprobe -u -c=0`')
    return _check('device_nodes_present', 'fail', '; '.join(problems), '; '.join(remedies))


def _node_order(name):
    if name == 'nvidiactl':
        return (0, 0)
    if name[6:].isdigit():
        return (1, int(name[6:]))
    return (2, name)


def _check_char_links(facts):
    nodes = [node for node in facts['device_nodes'].values() if node['char_device']]
    if not nodes:
        return _check('dev_char_symlinks_present', 'skip', 'no NVIDIA character device nodes to link')
    missing = sorted('/dev/char/%d:%d (for %s)' % (node['major'], node['minor'], node['path']) for node in nodes if not node['char_link'])
    if not missing:
        return _check('dev_char_symlinks_present', 'pass', 'every NVIDIA device node has its /dev/char symlink')
    return _check('dev_char_symlinks_present', 'warn', 'missing /dev/char symlinks: %s; containers using the systemd cgroup driver can lose '
                  'GPU access after `systemctl daemon-reload` ("Failed to initialize NVML: Unknown Error")' % ', '.join(missing),
                  'run `nvidia-ctk system create-dev-char-symlinks --create-all` and install its udev rule')


_SMI_REMEDIES = {
    'not_found': 'install the driver user-space tools (Debian: nvidia-smi; Ubuntu: nvidia-utils-<branch>) or set nvidia_smi_path',
    'cannot_communicate': 'the kernel driver is not loaded or does not bind the GPU: check `lsmod | grep nvidia` and `dmesg | grep NVRM`, '
                          'rebuild/install the kernel module for this kernel (DKMS), then `modprobe nvidia`',
    'driver_library_mismatch': 'reboot or reload the driver modules so the kernel module matches the installed library '
                               '(`rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia`)',
    'no_devices': 'the driver loaded but bound no GPU: check `lspci -d 10de:`, `dmesg | grep NVRM` (RmInitAdapter failed, '
                  'nouveau conflict, BAR/Above-4G decoding settings)',
    'gpu_lost': 'a GPU fell off the bus: drain the node and reboot it; if it repeats, check power and PCIe seating and raise an RMA',
    'gpu_handle_lost': 'nvidia-smi sees GPU <pci> but cannot open it, the usual sign of a GPU lost from the bus: drain the node, then reset '
                       'the GPU (`nvidia-smi -r -i <pci>`) or reboot; check the kernel log for Xid 79 (`dmesg | grep -i -e xid -e \'fallen off\'`) '
                       'and the PCIe link (`lspci -vvv -s <pci>`: link status, AER errors); if it repeats, check power and seating and raise an RMA',
    'unknown_error': 'NVML could not reach a GPU: inside a container this is usually lost device cgroup access (restart the container, '
                     'create /dev/char symlinks); on the host check `dmesg | grep -i xid` and reset or reboot',
    'insufficient_permissions': 'run as root or give the user access to /dev/nvidia*',
    'nvml_not_found': 'install the NVML library package (Debian: libnvidia-ml1) matching the driver',
    'nvml_init_failed': 'check `dmesg | grep NVRM` and that the driver packages are complete and of one version',
    'timeout': 'nvidia-smi hung: typical for a GPU in a bad state; check `dmesg | grep -i xid`, drain and reboot the node',
    'malformed_output': 'compare the nvidia-smi version with the driver; report the output shown in the message',
    'failed': 'run nvidia-smi by hand and read its output',
}


def _check_nvidia_smi(facts):
    smi = facts['nvidia_smi']
    if smi['ok']:
        return _check('nvidia_smi_runs', 'pass', 'nvidia-smi reports %d GPU(s)' % facts['gpu_count'])
    error_class = smi['error_class'] or 'failed'
    message = 'nvidia-smi failed (%s, rc %s): %s' % (error_class, smi['rc'], smi['error_message'] or '')
    remedy = _smi_remedy(error_class, smi)
    if error_class not in ('not_found', 'nvml_not_found') and not facts['modules'].get('nvidia'):
        message += ' (the nvidia kernel module is not loaded)'
        remedy = _SMI_REMEDIES['cannot_communicate']
    return _check('nvidia_smi_runs', 'fail', message, remedy)


def _smi_remedy(error_class, smi):
    """The remedy of an nvidia-smi error class, naming the GPU nvidia-smi could not open where it printed one."""
    remedy = _SMI_REMEDIES.get(error_class, _SMI_REMEDIES['failed'])
    addresses = [error['pci_bus_id'] for error in smi.get('gpu_errors') or []]
    return remedy.replace('<pci>', addresses[0]) if addresses and len(set(addresses)) == 1 else remedy


def _check_versions_match(facts):
    driver = facts['driver']
    smi = facts['nvidia_smi']
    kernel = driver['kernel_module_version']
    library = driver['userspace_version']
    mismatch_log = facts['kernel_log'].get('api_mismatch')
    if smi['error_class'] == 'driver_library_mismatch':
        library = library or smi.get('nvml_version')
        parts = ['nvidia-smi reports "Driver/library version mismatch"']
        if kernel or library:
            parts.append('kernel module %s vs library %s' % (kernel or '?', library or '?'))
        if mismatch_log:
            parts.append('kernel log: %s %s, kernel module %s' % (_mismatch_client(mismatch_log), mismatch_log['client'], mismatch_log['kernel']))
        return _check('driver_versions_match', 'fail', '; '.join(parts), _versions_remedy(kernel, library))
    if kernel is None or library is None:
        missing = []
        if kernel is None:
            missing.append('kernel module version (no /proc/driver/nvidia/version or /sys/module/nvidia/version)')
        if library is None:
            missing.append('user-space version (nvidia-smi failed and no libnvidia-ml.so.<version> found)')
        return _check('driver_versions_match', 'skip', 'cannot compare: no %s' % ' and no '.join(missing))
    if kernel == library:
        return _check('driver_versions_match', 'pass', 'kernel module and user-space driver are both %s' % kernel)
    return _check('driver_versions_match', 'fail', 'kernel module %s vs user-space %s (from %s)' % (kernel, library, driver['userspace_version_source']),
                  _versions_remedy(kernel, library))


def _mismatch_client(mismatch):
    """'client', or "client 'nvidia-smi' (pid 1234)" where the kernel's API mismatch report names it."""
    words = ['client']
    if mismatch.get('client_name'):
        words.append("'%s'" % mismatch['client_name'])
    if mismatch.get('client_pid') is not None:
        words.append('(pid %d)' % mismatch['client_pid'])
    return ' '.join(words)


def _versions_remedy(kernel, library):
    return 'reboot or reload the driver modules: kernel module %s vs library %s (stop GPU clients: nvidia-persistenced, dcgm, ' \
           'device plugin; then `rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia nvidia_uvm`; ' \
           'if the initramfs carries an old module, regenerate it)' % (kernel or '?', library or '?')


def _check_expected_version(facts, expected):
    if not expected:
        return _check('driver_version_expected', 'skip', 'expected_driver_version not given')
    driver = facts['driver']
    seen = []
    if driver['kernel_module_version']:
        seen.append(('kernel module', driver['kernel_module_version']))
    if driver['userspace_version']:
        seen.append(('user-space (%s)' % driver['userspace_version_source'], driver['userspace_version']))
    if not seen:
        return _check('driver_version_expected', 'fail', 'expected driver %s but no driver version could be read (no kernel module, '
                      'nvidia-smi failed, no libnvidia-ml.so.<version>)' % expected,
                      'install driver %s (nvidia_driver role) and load it' % expected)
    wrong = ['%s is %s' % (what, version) for what, version in seen if version != expected]
    if not wrong:
        return _check('driver_version_expected', 'pass', 'driver version is %s (%s)' % (expected, ', '.join(what for what, dummy in seen)))
    return _check('driver_version_expected', 'fail', 'expected driver %s: %s' % (expected, '; '.join(wrong)),
                  'install driver %s (nvidia_driver role: nvidia_driver_version) and reboot or reload the modules' % expected)


def _check_cuda(facts, cuda_versions, forward_compat):
    driver = facts['driver']
    status, message, remedy = _cuda.host_check(driver.get('cuda_version'), cuda_versions, bool(forward_compat),
                                               [gpu.get('name') or '' for gpu in facts['gpus']],
                                               driver.get('cuda_version_error') or '')
    return _check('cuda_supported', status, message, remedy)


def _check_gpu_count(facts, expected):
    if expected is None:
        return _check('gpu_count_expected', 'skip', 'expected_gpu_count not given')
    count = facts['gpu_count']
    if count is None:
        return _check('gpu_count_expected', 'fail', 'expected %d GPU(s) but nvidia-smi could not list them' % expected,
                      'fix nvidia_smi_runs first')
    if count == expected:
        return _check('gpu_count_expected', 'pass', '%d GPU(s) as expected' % count)
    return _check('gpu_count_expected', 'fail', 'expected %d GPU(s), nvidia-smi lists %d' % (expected, count),
                  'compare with `lspci -d 10de:` (a GPU missing from nvidia-smi but on the PCI bus failed to initialise: see `dmesg | grep NVRM`); '
                  'reseat or RMA a GPU missing from the bus')


def _check_mig_mode(facts, expected):
    if not expected:
        return _check('mig_mode_expected', 'skip', 'expected_mig_mode not given')
    if facts['gpu_count'] is None:
        return _check('mig_mode_expected', 'fail', 'expected MIG mode %s but nvidia-smi could not list the GPUs' % expected,
                      'fix nvidia_smi_runs first')
    want = 'Enabled' if expected == 'enabled' else 'Disabled'
    wrong = []
    for gpu in facts['gpus']:
        mode = gpu['mig_mode'] or 'Disabled'
        if gpu['mig_mode'] is None and expected == 'enabled':
            wrong.append('GPU %d (%s) does not support MIG' % (gpu['index'], gpu['name']))
        elif mode != want:
            wrong.append('GPU %d MIG mode is %s' % (gpu['index'], mode))
    if not wrong:
        return _check('mig_mode_expected', 'pass', 'MIG mode %s on all %d GPU(s)' % (expected, facts['gpu_count']))
    return _check('mig_mode_expected', 'fail', 'expected MIG mode %s: %s' % (expected, '; '.join(wrong)),
                  'drain the node, then `nvidia-smi -i <index> -mig %d` and reset the GPU (`nvidia-smi -r -i <index>`) or reboot'
                  % (1 if expected == 'enabled' else 0))


def _check_xids(facts, critical):
    log = facts['kernel_log']
    if not log['readable']:
        return _check('critical_xids_absent', 'skip', 'kernel log not readable: %s' % log['error'])
    events = facts['xid_events']
    found = _critical_addresses(events, set(critical), log['fallen_off_bus'])
    if found:
        return _check('critical_xids_absent', 'fail', _critical_message(log, events, found), _critical_remedy(found))
    if events:
        codes = sorted(set(event['code'] for event in events))
        return _check('critical_xids_absent', 'warn', 'non-critical Xid events in the kernel log: %s' % ', '.join(
            'Xid %d (%s)' % (code, XID_DESCRIPTIONS.get(code, 'see NVIDIA Xid catalog')) for code in codes),
            'usually application faults: check the workloads that ran on the GPU at that time')
    return _check('critical_xids_absent', 'pass', 'no Xid events in the kernel log (%s)' % log['source'])


def _critical_addresses(events, critical, fallen_off_bus):
    """{code: sorted PCI addresses} of the critical Xid events; a GPU reported fallen off the bus counts as Xid 79,
    with or without an Xid line and whether or not 79 is critical."""
    found = {}
    for event in events:
        if event['code'] in critical:
            found.setdefault(event['code'], set()).add(event['pci'] or '?')
    if fallen_off_bus:
        found.setdefault(XID_FALLEN_OFF_BUS, set()).update(fallen_off_bus)
    return dict((code, sorted(addresses)) for code, addresses in found.items())


def _critical_message(log, events, found):
    details = ['Xid %d %s on %s' % (code, XID_DESCRIPTIONS.get(code, ''), ', '.join(found[code])) for code in sorted(found)]
    with_xid_line = set(event['pci'] for event in events if event['code'] == XID_FALLEN_OFF_BUS)
    without_xid_line = [pci for pci in log['fallen_off_bus'] if pci not in with_xid_line]
    message = 'critical Xid events in the kernel log (%s): %s' % (log['source'], '; '.join(details))
    if without_xid_line:
        message += ' (%s: kernel report without an Xid line)' % ', '.join(without_xid_line)
    return message


def _critical_remedy(found):
    remedies = []
    if XID_FALLEN_OFF_BUS in found:
        remedies.append('GPU(s) %s fell off the bus: drain the node, then reset the GPU (`nvidia-smi -r -i <pci>`) or reboot; '
                        'check the PCIe link (`lspci -vvv -s <pci>`: link status, AER errors) and `dmesg | grep -i \'fallen off\'`, '
                        'then power and seating; raise an RMA if it repeats' % ', '.join(found[XID_FALLEN_OFF_BUS]))
    if any(code != XID_FALLEN_OFF_BUS for code in found):
        remedies.append('drain the node and reset the GPU(s) or reboot; if the Xid repeats after reboot, check retired pages / remapped rows '
                        '(`nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER`) and raise an RMA')
    return '; '.join(remedies)
