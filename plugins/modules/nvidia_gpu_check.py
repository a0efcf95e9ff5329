#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: nvidia_gpu_check
short_description: Gather NVIDIA GPU host facts and check the kernel, driver and GPU layers
version_added: 0.1.0
description:
  - Gathers every host-layer fact of an NVIDIA GPU machine in one call and evaluates a fixed list of checks on them,
    replacing the manual checklist (C(nvidia-smi) queries, C(uname -r), C(lsmod | grep nvidia), C(ls -l /dev/nvidia*),
    C(/proc/driver/nvidia/version), C(/proc/cmdline), the kernel log).
  - Facts cover the kernel (release, command line IOMMU settings, Secure Boot), the loaded NVIDIA kernel modules,
    the kernel module and user-space driver versions, every GPU (index, name, UUID, PCI bus id, memory, persistence
    mode, MIG mode and MIG devices), the device nodes with their C(/dev/char) symlinks, and recent Xid events.
  - Each check is returned as C({id, layer, status, message, remedy}) with status C(pass), C(fail), C(warn) or C(skip).
    The check ids are C(driver_module_loaded), C(uvm_module_loaded), C(required_modules_loaded), C(device_nodes_present),
    C(dev_char_symlinks_present) (layer C(kernel)); C(nvidia_smi_runs), C(driver_versions_match), C(driver_version_expected),
    C(cuda_supported) (layer C(driver)); C(gpu_count_expected), C(mig_mode_expected), C(critical_xids_absent) (layer C(gpu)).
  - Runs C(nvidia-smi) once (once more when a GPU has MIG enabled, to list its MIG devices, and when the CUDA version is
    read, O(read_cuda_version)) and reads files; it changes nothing unless O(fix_device_nodes=true).
  - All C(/proc), C(/sys) and C(/dev) paths are read below O(host_root), so the module can inspect a host whose root file
    system is mounted into a container, or a simulated GPU host tree.
author:
  - gpufleet maintainers (@gpufleet)
options:
  expected_driver_version:
    description:
      - Driver version the host must run, for example V(535.261.03).
      - The kernel module version and the user-space version (from C(nvidia-smi), else from the installed
        C(libnvidia-ml.so.<version>)) must both equal it where they can be read; check C(driver_version_expected)
        fails when neither can be read.
      - When not given, check C(driver_version_expected) is skipped.
    type: str
  read_cuda_version:
    description:
      - Also run plain C(nvidia-smi) once, whose table header is the only place it prints the highest CUDA version the
        driver runs (C(CUDA Version)); it becomes C(driver.cuda_version) of the facts and the subject of check C(cuda_supported).
      - Implied by a non-empty O(cuda_versions).
    type: bool
    default: false
  cuda_versions:
    description:
      - The CUDA releases the images on this host need, as major.minor (for example V(12.4)).
      - Check C(cuda_supported) fails when the driver runs an older CUDA than the highest of them (and when its CUDA
        version cannot be read). When empty, the check reports the CUDA version read, or is skipped.
    type: list
    elements: str
    default: []
  cuda_forward_compat:
    description:
      - The images carry NVIDIA's forward compatibility package (C(cuda-compat)). A driver older than O(cuda_versions) need
        then warns instead of failing, except on GeForce and TITAN GPUs, which forward compatibility does not serve.
    type: bool
    default: false
  expected_gpu_count:
    description:
      - Number of GPUs C(nvidia-smi) must list. When not given, check C(gpu_count_expected) is skipped.
    type: int
  expected_mig_mode:
    description:
      - Current MIG mode every GPU must have. A GPU without MIG support counts as V(disabled).
      - When not given, check C(mig_mode_expected) is skipped.
    type: str
    choices: [enabled, disabled]
  required_modules:
    description:
      - Kernel modules that must be loaded.
      - C(nvidia) is always checked (C(driver_module_loaded)). When C(nvidia_uvm) is listed a missing C(nvidia_uvm)
        fails C(uvm_module_loaded), otherwise it only warns. The other listed modules are checked by C(required_modules_loaded).
    type: list
    elements: str
    choices: [nvidia, nvidia_uvm, nvidia_modeset, nvidia_drm, nvidia_peermem]
    default: [nvidia, nvidia_uvm]
  critical_xids:
    description:
      - Xid codes whose presence in the kernel log fails check C(critical_xids_absent). Other Xid codes only warn.
      - The default covers double-bit ECC (48), page retirement/row remapper failure (64), NVLink (74), GPU fallen off the
        bus (79), uncontained ECC (95) and GSP timeouts/errors (119, 120).
      - "A kernel report of a GPU that has fallen off the bus (C(NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.), or the older
        C(The NVIDIA GPU ... installed in this system has fallen off the bus)) fails the check as Xid 79, even without an Xid line
        and even when 79 is not listed."
    type: list
    elements: int
    default: [48, 64, 74, 79, 95, 119, 120]
  fix_device_nodes:
    description:
      - Load C(nvidia_uvm) when it is missing (C(modprobe), with C(-d host_root) when O(host_root) is not C(/)) and create
        missing C(/dev/nvidia-uvm) and C(/dev/nvidia-uvm-tools) below O(host_root) the way C(nvidia-modprobe -u -c=0) does,
        with the major number of C(nvidia-uvm) from C(/proc/devices), minors 0 and 1, mode 0666, owner root,
        and their C(/dev/char/<major>:<minor>) symlinks when C(/dev/char) exists.
      - Reports C(changed) and a diff; in check mode nothing is changed. Checks are evaluated after the fix.
    type: bool
    default: false
  fail_on_error:
    description:
      - Fail the task when any check has status C(fail), listing every failed check.
      - With V(false) the task succeeds and the caller reads RV(checks) and RV(failed_checks).
    type: bool
    default: true
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) executable. Default is C(nvidia-smi) found in the module's C(PATH).
    type: path
  host_root:
    description:
      - Directory where the host's C(/proc), C(/sys), C(/dev) and library directories are found.
      - V(/) for the machine the module runs on; the host's mount point when running from a container that mounts the host;
        the tree of the lab's simulated GPU host in tests.
    type: path
    default: /
attributes:
  action_group:
    description: Use C(group/gpufleet.node.gpu) in C(module_defaults) to set defaults for this module, such as
      O(host_root) and O(nvidia_smi_path), once for a play.
    support: full
    membership:
      - gpufleet.node.gpu
  check_mode:
    support: full
    description: Nothing is changed in check mode; C(changed) tells whether O(fix_device_nodes) would change something.
  diff_mode:
    support: full
    description: With O(fix_device_nodes), the diff shows the kernel module and device nodes before and after.
  idempotent:
    support: full
    description: A second run with O(fix_device_nodes) after a successful fix reports no change.
notes:
  - Reading the kernel log needs C(/dev/kmsg) below O(host_root) (or C(/var/log/kern.log)); when neither can be read
    check C(critical_xids_absent) is skipped.
  - C(/dev/nvidia<N>) nodes are expected for N from 0 to the GPU count minus one; when C(nvidia-smi) cannot count the GPUs
    only C(/dev/nvidiactl), the uvm nodes and the C(/dev/nvidia<N>) nodes that exist are checked.
  - C(nvidia-smi) runs under coreutils C(timeout) (60 seconds) when available, so a hung GPU cannot hang the play.
seealso:
  - name: NVIDIA Xid errors
    description: NVIDIA's catalog of Xid error codes.
    link: https://docs.nvidia.com/deploy/xid-errors/
'''

EXAMPLES = r'''
- name: Set the host root once for every check of a block (or a play)
  module_defaults:
    group/gpufleet.node.gpu:
      host_root: /host
  block:
    - name: Check the GPU host layer
      gpufleet.node.nvidia_gpu_check:

- name: Check the GPU host layer (fails listing every failed check)
  gpufleet.node.nvidia_gpu_check:
    expected_driver_version: 535.261.03
    expected_gpu_count: 8

- name: Diagnose without failing, then report
  gpufleet.node.nvidia_gpu_check:
    fail_on_error: false
    expected_mig_mode: disabled
    required_modules: [nvidia, nvidia_uvm, nvidia_peermem]
  register: gpu_health

- name: Show the failed checks with their remedies
  ansible.builtin.debug:
    msg: "{{ gpu_health.checks | selectattr('status', 'equalto', 'fail') | map(attribute='remedy') | list }}"

- name: Load nvidia_uvm and create /dev/nvidia-uvm* when missing
  gpufleet.node.nvidia_gpu_check:
    fix_device_nodes: true

- name: Inspect the host from a container that mounts it at /host
  gpufleet.node.nvidia_gpu_check:
    host_root: /host
    nvidia_smi_path: /usr/bin/nvidia-smi

- name: Inspect the lab's simulated GPU host
  gpufleet.node.nvidia_gpu_check:
    host_root: /opt/gpusim/root
    nvidia_smi_path: /opt/gpusim/bin/nvidia-smi
    fail_on_error: false
'''

RETURN = r'''
checks:
  description: Every check, in a fixed order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Check id.
      type: str
      sample: uvm_module_loaded
    layer:
      description: Layer the check belongs to.
      type: str
      choices: [kernel, driver, gpu]
      sample: kernel
    status:
      description: Outcome.
      type: str
      choices: [pass, fail, warn, skip]
      sample: fail
    message:
      description: What was found.
      type: str
      sample: "kernel module nvidia_uvm is not loaded: CUDA applications and containers cannot start"
    remedy:
      description: What to do about a failure or warning; empty when passed or skipped.
      type: str
      sample: "run `nvidia-modprobe -u -c=0`; list nvidia-uvm in a file under /etc/modules-load.d/"
  sample:
    - {id: driver_module_loaded, layer: kernel, status: pass, message: "kernel module nvidia is loaded (version 535.261.03)", remedy: ""}
failed_checks:
  description: Ids of the checks with status C(fail).
  returned: always
  type: list
  elements: str
  sample: [nvidia_smi_runs, driver_versions_match]
failed_layers:
  description: Layers with at least one failed check.
  returned: always
  type: list
  elements: str
  sample: [driver]
nvidia_gpu:
  description: Host-layer facts, also set as the fact C(nvidia_gpu).
  returned: always
  type: dict
  contains:
    host_root:
      description: The O(host_root) the facts were read from.
      type: str
      sample: /
    kernel:
      description: Kernel facts.
      type: dict
      contains:
        release:
          description: Kernel release (C(/proc/sys/kernel/osrelease)).
          type: str
          sample: 6.1.0-28-amd64
        cmdline:
          description: Kernel command line.
          type: str
          sample: BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt
        iommu:
          description: IOMMU-related parameters of the command line (C(intel_iommu), C(amd_iommu), C(iommu), C(iommu.passthrough), C(iommu.strict)).
          type: dict
          sample: {intel_iommu: "on", iommu: pt}
        efi:
          description: Whether the host booted with EFI.
          type: bool
        secure_boot:
          description: Secure Boot state from the EFI variable; false without EFI; null when it could not be read.
          type: bool
    modules:
      description: Whether each NVIDIA kernel module is loaded.
      type: dict
      sample: {nvidia: true, nvidia_uvm: false, nvidia_modeset: true, nvidia_drm: true, nvidia_peermem: false}
    uvm_major:
      description: Character device major of C(nvidia-uvm) in C(/proc/devices), null when absent.
      type: int
      sample: 510
    driver:
      description: Driver versions.
      type: dict
      contains:
        kernel_module_version:
          description: Version of the loaded kernel module.
          type: str
          sample: 535.261.03
        kernel_module_version_source:
          description: File it was read from (C(/proc/driver/nvidia/version) or C(/sys/module/nvidia/version)).
          type: str
        kernel_module_flavour:
          description: C(proprietary) or C(open), when read from C(/proc/driver/nvidia/version).
          type: str
        userspace_version:
          description: User-space driver version.
          type: str
          sample: 535.261.03
        userspace_version_source:
          description: C(nvidia-smi) or C(libnvidia-ml) (the installed C(libnvidia-ml.so.<version>)).
          type: str
        nvml_library_versions:
          description: Versions of the C(libnvidia-ml.so.<version>) files found.
          type: list
          elements: str
        cuda_version:
          description:
            - The highest CUDA version the driver runs, as plain C(nvidia-smi) prints it (C(CUDA Version)); null when not
              read (O(read_cuda_version)) or not readable.
          type: str
        cuda_version_source:
          description: C(nvidia-smi) when read.
          type: str
        cuda_version_error:
          description: Why the CUDA version was not read, when it was asked for; null otherwise.
          type: str
    nvidia_smi:
      description: Outcome of the nvidia-smi query.
      type: dict
      contains:
        path:
          description: Executable run.
          type: str
        ok:
          description: Whether it listed the GPUs without error.
          type: bool
        rc:
          description: Exit status.
          type: int
        error_class:
          description:
            - Classified failure, null when ok.
            - One of C(not_found), C(cannot_communicate), C(driver_library_mismatch), C(no_devices), C(gpu_lost), C(gpu_handle_lost),
              C(unknown_error), C(insufficient_permissions), C(nvml_not_found), C(nvml_init_failed), C(timeout), C(malformed_output),
              C(failed).
            - "C(gpu_handle_lost) is nvidia-smi seeing a GPU it cannot open (C(Unable to determine the device handle for GPU0000:91:00.0: Unknown Error)),
              the usual sign of a GPU lost from the bus; C(gpu_lost) is the same line with C(GPU is lost)."
          type: str
          sample: cannot_communicate
        error_message:
          description: The error line nvidia-smi printed (or the parse error).
          type: str
        nvml_version:
          description: NVML library version printed with a version-mismatch error.
          type: str
        gpu_errors:
          description: Per-GPU "Unable to determine the device handle" errors (C(pci_bus_id), C(reason), C(line)).
          type: list
          elements: dict
        output:
          description: Last 2000 characters of what nvidia-smi printed.
          type: str
    gpus:
      description: GPUs listed by nvidia-smi.
      type: list
      elements: dict
      contains:
        index:
          description: nvidia-smi index.
          type: int
        name:
          description: Product name.
          type: str
          sample: NVIDIA H100 80GB HBM3
        uuid:
          description: GPU UUID.
          type: str
        pci_bus_id:
          description: PCI bus id as nvidia-smi prints it.
          type: str
          sample: 00000000:18:00.0
        memory_total_mib:
          description: Total memory in MiB.
          type: int
          sample: 81559
        persistence_mode:
          description: C(Enabled) or C(Disabled).
          type: str
        mig_mode:
          description: Current MIG mode (C(Enabled), C(Disabled)), null when not supported.
          type: str
        driver_version:
          description: Driver version reported for the GPU.
          type: str
        mig_devices:
          description: MIG devices from C(nvidia-smi -L) (C(index), C(profile), C(uuid)).
          type: list
          elements: dict
    gpu_count:
      description: Number of GPUs listed; null when nvidia-smi could not list them.
      type: int
    device_nodes:
      description: Device nodes by name (C(nvidiactl), C(nvidia<N>), C(nvidia-uvm), C(nvidia-uvm-tools)).
      type: dict
      sample:
        nvidia-uvm: {path: /dev/nvidia-uvm, present: true, char_device: true, major: 510, minor: 0, mode: "0666", uid: 0, gid: 0, char_link: true}
    kernel_log:
      description: Where the kernel log was read and what it says besides Xid lines.
      type: dict
      contains:
        readable:
          description: Whether a kernel log could be read.
          type: bool
        source:
          description: File read.
          type: str
        error:
          description: Why it could not be read.
          type: str
        api_mismatch:
          description: Last "NVRM API mismatch" report, null when none.
          type: dict
          contains:
            client:
              description: Version of the client, that is of the user-space driver.
              type: str
              sample: 570.148.08
            kernel:
              description: Version of the loaded kernel module.
              type: str
              sample: 570.148.06
            client_name:
              description: Name of the client process, as newer drivers report it; null when not reported.
              type: str
              sample: nvidia-smi
            client_pid:
              description: Process id of the client, as newer drivers report it; null when not reported.
              type: int
              sample: 1234
        fallen_off_bus:
          description:
            - PCI addresses (normalized, C(0000:91:00)) of the GPUs the kernel reported as fallen off the bus, with or without an
              Xid 79 line.
            - Check C(critical_xids_absent) counts each as an Xid 79.
          type: list
          elements: str
    xid_events:
      description: Xid events of the kernel log (last 100), oldest first.
      type: list
      elements: dict
      contains:
        code:
          description: Xid code.
          type: int
          sample: 79
        pci:
          description: PCI address, normalized (C(0000:9b:00)).
          type: str
        gpu_index:
          description: Index of the GPU with that address, when listed.
          type: int
        pid:
          description: Process id, when given.
          type: int
        process:
          description: Process name, when given.
          type: str
        message:
          description: Rest of the Xid line.
          type: str
        timestamp:
          description: Text before C(NVRM:) on the log line.
          type: str
    read_errors:
      description: Files that could not be read or parsed.
      type: list
      elements: str
fix:
  description: What O(fix_device_nodes) did or would do.
  returned: when O(fix_device_nodes=true)
  type: dict
  contains:
    actions:
      description: Changes made (or that would be made in check mode).
      type: list
      elements: str
      sample: ["create /dev/nvidia-uvm c 510 0", "create /dev/nvidia-uvm-tools c 510 1"]
    errors:
      description: Changes that failed.
      type: list
      elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.node.plugins.module_utils import _cuda
from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_health import (
    CHECK_IDS,
    DEFAULT_CRITICAL_XIDS,
    DEFAULT_REQUIRED_MODULES,
    NVIDIA_MODULES,
    Gatherer,
    HostTree,
    UvmNodeFixer,
    host_report,
)
from ansible_collections.gpufleet.node.plugins.module_utils._run import CommandRunner


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            expected_driver_version=dict(type='str'),
            expected_gpu_count=dict(type='int'),
            expected_mig_mode=dict(type='str', choices=['enabled', 'disabled']),
            required_modules=dict(type='list', elements='str', choices=list(NVIDIA_MODULES), default=list(DEFAULT_REQUIRED_MODULES)),
            critical_xids=dict(type='list', elements='int', default=list(DEFAULT_CRITICAL_XIDS)),
            fix_device_nodes=dict(type='bool', default=False),
            fail_on_error=dict(type='bool', default=True),
            nvidia_smi_path=dict(type='path'),
            host_root=dict(type='path', default='/'),
            read_cuda_version=dict(type='bool', default=False),
            cuda_versions=dict(type='list', elements='str', default=[]),
            cuda_forward_compat=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['expected_gpu_count'] is not None and params['expected_gpu_count'] < 0:
        module.fail_json(msg='expected_gpu_count is %d: it must be 0 or more' % params['expected_gpu_count'])
    if any(code < 0 for code in params['critical_xids']):
        module.fail_json(msg='critical_xids is %s: Xid codes are positive integers' % params['critical_xids'])
    version = params['expected_driver_version']
    if version is not None and not all(part.isdigit() for part in version.split('.')):
        module.fail_json(msg='expected_driver_version is %r: it must be a driver version such as 535.261.03' % version)
    bad_cuda = _cuda.version_problems(params['cuda_versions'])
    if bad_cuda:
        module.fail_json(msg=bad_cuda)
    if not os.path.isdir(params['host_root']):
        module.fail_json(msg='host_root is %r: it must be an existing directory (/ for this host)' % params['host_root'])

    runner = CommandRunner(module)
    gatherer = Gatherer(runner, host_root=params['host_root'], nvidia_smi_path=params['nvidia_smi_path'],
                        read_cuda=params['read_cuda_version'] or bool(params['cuda_versions']))
    facts = gatherer.gather()
    result = dict(changed=False)

    if params['fix_device_nodes']:
        fixer = UvmNodeFixer(runner, HostTree(params['host_root']), module.check_mode)
        changed = fixer.run(facts)
        result['changed'] = changed
        result['fix'] = {'actions': fixer.actions, 'errors': fixer.errors}
        if changed:
            result['diff'] = {
                'before_header': 'NVIDIA uvm module and device nodes',
                'after_header': 'NVIDIA uvm module and device nodes',
                'before': '\n'.join(fixer.before) + '\n',
                'after': '\n'.join(fixer.after) + '\n',
            }
            if not module.check_mode:
                facts = gatherer.gather()

    result.update(host_report(facts, params), ansible_facts={'nvidia_gpu': facts})
    failed = [check for check in result['checks'] if check['status'] == 'fail']
    fix_errors = result.get('fix', {}).get('errors')
    if fix_errors:
        module.fail_json(msg='fix_device_nodes failed: %s' % '; '.join(fix_errors), **result)
    if failed and params['fail_on_error']:
        module.fail_json(msg='%d of %d GPU host checks failed: %s' % (
            len(failed), len(CHECK_IDS), '; '.join('%s: %s' % (check['id'], check['message']) for check in failed)), **result)
    module.exit_json(**result)


def main():
    run_module()


if __name__ == '__main__':
    main()
