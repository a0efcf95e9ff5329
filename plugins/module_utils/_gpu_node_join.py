# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_node_join role's judgements of a node and its Node (private to gpufleet.node).

Each function takes what the role read (the node's GPU check, the toolkit's configuration, the Node and the device
plugin pods from the API) and the role's settings, and returns a verdict; the role's filters call them, and the role
acts on their verdicts with plain modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import json
import re

from ansible_collections.gpufleet.node.plugins.module_utils._cmdline import cmdline_flag
from ansible_collections.gpufleet.node.plugins.module_utils._coexistence import operator_node_labels, other_gpu_daemonsets
from ansible_collections.gpufleet.node.plugins.module_utils._gpu_node_join_manifests import CONFIG_LABEL, shared_config_key

# NVIDIA's defaults of the toolkit's settings that decide which device lists the runtime honours.
TOOLKIT_DEFAULTS = {'envvar': 'true', 'mounts': 'false', 'mode': 'auto'}
ONBOARD = 'run playbooks/onboard.yml for the node'
READY_TIME_FORMAT = '%Y-%m-%dT%H:%M:%SZ'
UTC = datetime.timezone.utc


def _int(value):
    """A count as the API gives it ('8', 8), 0 when it is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _mapping(value):
    return value if isinstance(value, dict) else {}


def gpu_tier(gpus, tiers):
    """The tier of the first rule whose model_regex matches the first GPU's name and whose min_memory_mib its memory
    reaches; '' when no rule matches or the node shows no GPU."""
    if not gpus:
        return ''
    gpu = gpus[0]
    memory = _int(gpu.get('memory_total_mib'))
    for rule in tiers:
        if re.search(rule['model_regex'], gpu.get('name') or '') and memory >= _int(rule.get('min_memory_mib', 0)):
            return rule['tier']
    return ''


def driver_problem(driver, expected):
    """Why the node's running driver keeps it out of the pool; '' when it runs the installed (and expected) driver.

    ``driver``: the GPU check's C(driver) (kernel_module_version, userspace_version); ``expected``: the version the
    inventory expects, '' for any."""
    running = driver.get('kernel_module_version') or ''
    userspace = driver.get('userspace_version') or ''
    expected = str(expected or '')
    if not running:
        installed = (' (user space %s is installed)' % userspace) if userspace else ''
        return 'no NVIDIA kernel module is loaded%s: load it (modprobe nvidia nvidia_uvm) or reboot the node' % installed
    if userspace and userspace != running:
        return ('the loaded kernel module runs driver %s but the installed user space is %s (a driver/library mismatch: '
                'NVML and every GPU container fail): reload the NVIDIA kernel modules (gpufleet.node.nvidia_driver with '
                'nvidia_driver_module_reload=auto, once no GPU process holds them) or reboot the node' % (running, userspace))
    if expected and running != expected:
        return ('the node runs driver %s, not gpu_node_join_expected_driver_version=%s: install it with '
                'gpufleet.node.nvidia_driver, then reload the modules or reboot' % (running, expected))
    return ''


def _first_group(pattern, text, default):
    match = re.search(pattern, text)
    return match.group(1) if match else default


def toolkit_device_settings(text):
    """The toolkit settings (config.toml text) that decide which device lists its runtime honours; unset keys take
    NVIDIA's defaults. The two accept-* keys are top-level keys, so only the text before the first table counts."""
    top = re.split(r'(?m)^\[', text, maxsplit=1)[0]
    section = _first_group(r'(?ms)^\[nvidia-container-runtime\]\s*$(.*?)^\[', text + '\n[', '')
    return {
        'envvar': _first_group(r'(?m)^\s*accept-nvidia-visible-devices-envvar-when-unprivileged\s*=\s*(true|false)', top,
                               TOOLKIT_DEFAULTS['envvar']),
        'mounts': _first_group(r'(?m)^\s*accept-nvidia-visible-devices-as-volume-mounts\s*=\s*(true|false)', top,
                               TOOLKIT_DEFAULTS['mounts']),
        'mode': _first_group(r'(?m)^\s*mode\s*=\s*"([a-z-]+)"', section, TOOLKIT_DEFAULTS['mode']),
    }


def runtime_problems(toolkit_text, path, strategy):
    """Why the node's container runtime would not honour the device plugin's device-list strategy; [] when it does.

    ``toolkit_text``: the toolkit's config.toml, None when the file is missing."""
    if toolkit_text is None:
        return ['%s is missing: install the NVIDIA container toolkit first (gpufleet.node.container_toolkit)' % path]
    settings = toolkit_device_settings(toolkit_text)
    if strategy == 'volume-mounts' and settings['mounts'] != 'true':
        return ['the runtime refuses device lists passed as volume mounts (accept-nvidia-visible-devices-as-volume-mounts'
                ' = %s in %s); set container_toolkit_accept_devices_as_volume_mounts=true' % (settings['mounts'], path)]
    if strategy == 'volume-mounts' and settings['mode'] == 'cdi':
        return ['the runtime runs in mode cdi (%s), in which toolkit 1.17 reads only CDI names (cdi/...) from device-list'
                ' volume mounts and ignores the plugin\'s; set container_toolkit_runtime_mode=auto (or legacy), or use the'
                ' strategy cdi-annotations' % path]
    if strategy == 'envvar' and settings['envvar'] != 'true':
        return ['the runtime ignores NVIDIA_VISIBLE_DEVICES in unprivileged containers (accept-nvidia-visible-devices-'
                'envvar-when-unprivileged = %s in %s, the secure setting); use the strategy volume-mounts, or accept the'
                ' INSECURE container_toolkit_accept_envvar_when_unprivileged=true' % (settings['envvar'], path)]
    if strategy == 'cdi-annotations' and settings['mode'] != 'cdi':
        return ['the runtime runs in mode %s (%s), in which toolkit 1.17 ignores CDI annotations; set'
                ' container_toolkit_runtime_mode=cdi and container_toolkit_cdi_enabled=true' % (settings['mode'], path)]
    return []


def expected_resources(gpus, mig_strategy, replicas, resource):
    """The extended resources the Node must show: {name: count}.

    A GPU without MIG devices (or with mig_strategy none) counts once as ``resource``; with the strategy single each
    MIG device counts as one ``resource``; with mixed each is a nvidia.com/mig-<profile>. Time-slicing multiplies the
    GPUs by ``replicas`` (at least 1)."""
    gpu_count = 0
    mig = {}
    for gpu in gpus:
        mig_devices = (gpu.get('mig_devices') or []) if gpu.get('mig_mode') == 'Enabled' else []
        if mig_strategy == 'none' or not mig_devices:
            gpu_count += 1
        elif mig_strategy == 'single':
            gpu_count += len(mig_devices)
        else:
            for device in mig_devices:
                name = 'nvidia.com/mig-' + device['profile']
                mig[name] = mig.get(name, 0) + 1
    resources = {resource: gpu_count * max(_int(replicas), 1)} if gpu_count else {}
    resources.update(mig)
    return resources


def _ready_since(pod):
    """(ready, since): whether the pod is Ready, and since when (None when the condition gives no time)."""
    for condition in (pod.get('status') or {}).get('conditions') or []:
        if condition.get('type') == 'Ready' and condition.get('status') == 'True':
            since = condition.get('lastTransitionTime')
            return True, datetime.datetime.strptime(since, READY_TIME_FORMAT) if since else None
    return False, None


def plugin_pod_current(pods, template, now=None):
    """Whether a device plugin pod runs the DaemonSet's current ``template`` and has settled: it runs the template's
    C(image), its C(config_annotation) is the template's C(config_sha256), it is not being deleted, and it has been
    Ready for C(settle_seconds) by ``now`` (UTC, naive; the controller's clock by default). A Ready condition without a
    transition time counts.

    A plugin that dies at start is Ready for a moment at every restart, and the Node can still show the GPUs of the
    plugin it replaced until the kubelet next reports the Node's status: the settling time outlasts that."""
    now = now or datetime.datetime.now(UTC).replace(tzinfo=None)
    for pod in pods or []:
        metadata = pod.get('metadata') or {}
        ready, since = _ready_since(pod)
        settled = ready and (since is None or (now - since).total_seconds() >= _int(template['settle_seconds']))
        images = [container.get('image') for container in (pod.get('spec') or {}).get('containers') or []]
        annotations = _mapping(metadata.get('annotations'))
        if (settled and template['image'] in images and 'deletionTimestamp' not in metadata
                and annotations.get(template['config_annotation']) == template['config_sha256']):
            return True
    return False


def gpus_shown(node, expected):
    """Whether the Node's Capacity and Allocatable both show exactly ``expected`` (never true for nothing)."""
    status = _mapping(_mapping(node).get('status'))
    return bool(expected) and all(
        _int(_mapping(status.get(field)).get(name, '0')) == count
        for name, count in expected.items() for field in ('capacity', 'allocatable'))


def _taints_with(taints, key, effect=None):
    return [taint for taint in taints if taint.get('key') == key and (effect is None or taint.get('effect') == effect)]


def already_onboarded(node, problem, desired_labels, pool_taint, onboarding_taint, expected):
    """Whether the node runs the right driver (``problem`` is '') and its Node already has every desired label, the
    pool taint with its value, no onboarding taint, and the GPU resources it must show."""
    if problem:
        return False
    labels = _mapping(_mapping(node.get('metadata')).get('labels'))
    taints = _mapping(node.get('spec')).get('taints') or []
    pool = _taints_with(taints, pool_taint['key'], pool_taint.get('effect'))
    return (all(labels.get(key) == value for key, value in desired_labels.items())
            and bool(pool) and (pool[0].get('value') or '') == (pool_taint.get('value') or '')
            and not _taints_with(taints, onboarding_taint['key'])
            and gpus_shown(node, expected))


def _checkpoint_device_ids(checkpoint, pod_uid, resource):
    ids = []
    for entry in (checkpoint.get('Data') or {}).get('PodDeviceEntries') or []:
        if entry.get('PodUID') == pod_uid and entry.get('ResourceName') == resource:
            raw = entry.get('DeviceIDs') or []
            for group in (list(raw.values()) if isinstance(raw, dict) else [raw]):
                ids.extend(group)
    return ids


def _uuid_of(device_id, gpus):
    base = device_id.split('::')[0]
    if re.match('^(GPU|MIG)-', base):
        return base
    parts = base.split(':')
    if not re.match('^[0-9]', base):
        return base
    gpu = next((gpu for gpu in gpus if gpu.get('index') == _int(parts[0])), {})
    if len(parts) == 2:
        device = next((mig for mig in gpu.get('mig_devices') or [] if mig.get('index') == _int(parts[1])), {})
        return device.get('uuid', base)
    return gpu.get('uuid', base)


def allocated_uuids(checkpoint_b64, pod_uid, resource, gpus):
    """The UUIDs of the GPUs (or MIG devices) the kubelet allocated to a pod, from its device checkpoint (base64, as
    slurp reads it; '' for none). Device IDs are UUIDs (deviceIDStrategy uuid) or indices "<gpu>" and "<gpu>:<mig>"
    (index), with "::<n>" replicas, which name the same GPU."""
    checkpoint = json.loads(base64.b64decode(checkpoint_b64 or 'e30=').decode('utf-8'))
    uuids = []
    for device_id in _checkpoint_device_ids(checkpoint, pod_uid, resource):
        uuid = _uuid_of(device_id, gpus)
        if uuid not in uuids:
            uuids.append(uuid)
    return uuids


def _check(check_id, layer, ok, message, remedy, warn=False):
    return {'id': check_id, 'layer': layer, 'part': 'gpu_node_join', 'status': 'pass' if ok else ('warn' if warn else 'fail'),
            'message': message, 'remedy': '' if ok else remedy}


def _truncate(text, length=300):
    """As Jinja's truncate: cut at a word, with '...', when longer than length (and its leeway of 5)."""
    if len(text) <= length + 5:
        return text
    return text[:length - 3].rsplit(' ', 1)[0] + '...'


def _container_skip_reason(container, settings):
    strategy = settings['device_list_strategy']
    if not settings['strategy_passable']:
        return 'ctr cannot pass the strategy ' + strategy
    if not settings['gpus']:
        return 'the node shows no GPU'
    if not container.get('image_present'):
        return ('the image %s is not in containerd\'s k8s.io namespace (onboarding with gpu_node_join_smoke_test=true'
                ' pulls it)' % settings['smoke_test_image'])
    return 'containerd has no runtime handler ' + settings['runtime_handler']


def runtime_checks(problems, container, settings):
    """The runtime checks only gpu_node_join can make: the runtime honours the plugin's device-list strategy
    (``problems``: runtime_problems()), and a container run as the strategy asks (``container``: the node read's
    container_run) sees exactly the one GPU it asked for.

    ``settings``: device_list_strategy, strategy_passable (ctr can pass it), gpus (the node's), smoke_test_image,
    runtime_handler."""
    strategy = settings['device_list_strategy']
    checks = [_check('runtime_honours_strategy', 'runtime', not problems,
                     '; '.join(problems) if problems
                     else 'the runtime honours the device plugin\'s device-list strategy ' + strategy,
                     'apply gpufleet.node.container_toolkit with the setting named here, or change '
                     'gpu_node_join_device_list_strategy: ' + '; '.join(problems))]
    container = container or {}
    if not container.get('ran'):
        checks.append({'id': 'container_sees_gpus', 'layer': 'runtime', 'part': 'gpu_node_join', 'status': 'skip',
                       'message': 'no container was run: ' + _container_skip_reason(container, settings), 'remedy': ''})
        return checks
    binary = container.get('binary') or ''
    run = container.get('result') or {}
    seen = [line for line in run.get('stdout', '').splitlines() if re.match('^GPU [0-9]+:', line)]
    ok = run.get('rc') == 0 and len(seen) == 1
    asked = 'a container asking for GPU 0 through ' + binary
    output = _truncate((run.get('stdout', '') + ' ' + run.get('stderr', '')).strip())
    checks.append(_check(
        'container_sees_gpus', 'runtime', ok,
        (asked + ' saw exactly it: ' + seen[0]) if ok
        else '%s (%s) saw %d GPUs (rc %s, runs %s): %s' % (asked, strategy, len(seen), run.get('rc'),
                                                           container.get('attempts', 1), output),
        'fix the lower checks first; `ctr run --runc-binary %s` by hand shows the runtime\'s error' % binary))
    return checks


def _kubelet_root_dir(cmdline, default_root_dir):
    """The running kubelet's --root-dir (the default when it has none); '' when the kubelet is not running."""
    return (cmdline_flag(cmdline, 'root-dir') or default_root_dir) if cmdline else ''


def _strip_trailing_slashes(path):
    return path[:1] + path[1:].rstrip('/') if path else path


def _plugin_checks(pods, plugin_current, socket, root_dir, settings):
    namespace = settings['device_plugin_namespace']
    if not pods:
        return [_check('device_plugin_ready', 'kubernetes', False,
                       'no device plugin pod runs on the node (namespace %s)' % namespace,
                       'check the DaemonSet\'s node selector and the node\'s labels and taints; ' + ONBOARD)]
    first = pods[0]['metadata']['name']
    names = ', '.join(pod['metadata']['name'] for pod in pods)
    plugin_dir = settings['plugin_dir']
    named = _strip_trailing_slashes(settings['kubelet_root_dir'])
    root_ok = socket and named in ('', root_dir)
    if root_ok:
        root_message = 'the device plugin mounts %s, where the kubelet (--root-dir %s) serves kubelet.sock' % (plugin_dir, root_dir)
    elif socket:
        root_message = 'gpu_node_join_kubelet_root_dir is %s but the kubelet runs with --root-dir %s' % (named, root_dir)
    else:
        root_message = ('the device plugin mounts %s, where the kubelet (--root-dir %s) serves no kubelet.sock: the plugin'
                        ' cannot register its GPUs' % (plugin_dir, root_dir or '?'))
    return [
        _check('device_plugin_ready', 'kubernetes', plugin_current,
               ('the device plugin pod %s runs the current image and configuration and is Ready' % first) if plugin_current
               else 'no device plugin pod on the node runs %s with the current configuration and is Ready (%s)'
               % (settings['image'], names),
               'read the plugin pod\'s events and log (`kubectl -n %s logs %s`)' % (namespace, first)),
        _check('kubelet_root_dir', 'kubernetes', root_ok, root_message,
               'set gpu_node_join_kubelet_root_dir to the kubelet\'s --root-dir (%s), or leave it and '
               'gpu_node_join_device_plugin_dir empty, then %s' % (root_dir or '?', ONBOARD)),
    ]


def _label_and_taint_checks(node, settings):
    metadata = _mapping(node.get('metadata'))
    labels = _mapping(metadata.get('labels'))
    taints = _mapping(node.get('spec')).get('taints') or []
    missing = ['%s=%s' % (key, value) for key, value in settings['labels'].items() if labels.get(key) != str(value)]
    checks = [_check('pool_labels', 'kubernetes', not missing,
                     'the pool labels are set' if not missing else 'the Node lacks the labels ' + ', '.join(missing), ONBOARD)]
    pool_taint = settings['pool_taint'] or {}
    if pool_taint:
        tainted = bool(_taints_with(taints, pool_taint['key'], pool_taint.get('effect')))
        checks.append(_check('pool_taint', 'kubernetes', tainted, 'the pool taint %s:%s%s' % (
            pool_taint['key'], pool_taint.get('effect'),
            ' is set' if tainted else ' is missing: pods without a GPU toleration may land on the node'), ONBOARD))
    onboarding = settings['onboarding_taint_key']
    gated = bool(_taints_with(taints, onboarding))
    checks.append(_check('onboarding_taint_absent', 'kubernetes', not gated, 'the onboarding taint %s%s' % (
        onboarding, ' is still set: onboarding did not finish' if gated else ' is absent'),
        'fix the first failing check, then %s; it removes the taint once every check passes' % ONBOARD))
    checks += _plugin_config_checks(labels, settings.get('plugin_config'))
    prefix = settings['label_prefix']
    unhealthy = labels.get(prefix + '/gpu-health') == 'unhealthy'
    checks.append(_check('self_check_healthy', 'kubernetes', not unhealthy,
                         'the node\'s boot-time self-check reports it unhealthy: '
                         + _mapping(metadata.get('annotations')).get(prefix + '/gpu-health-failed-checks', '?')
                         if unhealthy else 'the node\'s self-check does not report it unhealthy',
                         'the host layer\'s failed checks say what broke'))
    return checks


def _config_named(name):
    return "configuration '%s'" % name if name else 'the shared configuration'


def _plugin_config_checks(labels, wanted):
    """With named configurations (``wanted`` is not None): whether the Node selects the plugin configuration it must."""
    if wanted is None:
        return []
    selected = labels.get(CONFIG_LABEL, '')
    message = 'the Node selects %s of the device plugin' % _config_named(selected)
    if selected != wanted:
        message += ', not %s (label %s)' % (_config_named(wanted), CONFIG_LABEL)
    return [_check('plugin_config', 'kubernetes', selected == wanted, message, ONBOARD)]


def kubernetes_checks(api_error, node, node_read, pods, plugin_current, expected, settings):
    """The Kubernetes layer's checks of a node, from what check.yml read on it and in the API.

    ``api_error``: why the API could not be read ('' when it could); ``node``: the Node, None when the API has none;
    ``node_read``: the node read (kubelet, stats); ``pods``: the device plugin pods on the node;
    ``plugin_current``: plugin_pod_current() of them; ``expected``: expected_resources().
    ``settings``: kubeconfig, api_host, node_name, kubelet_service, default_kubelet_root_dir, kubelet_root_dir,
    plugin_dir, device_plugin_namespace, image, labels (pool and extra labels), pool_taint, onboarding_taint_key,
    label_prefix."""
    if api_error is not None:
        return [_check('api_reachable', 'kubernetes', False, 'the API could not be read with %s (from %s): %s' % (
            settings['kubeconfig'], settings['api_host'], _truncate(str(api_error))),
            'check gpu_node_join_kubeconfig and gpu_node_join_api_host, and that the API server answers')]
    if node is None:
        return [_check('node_registered', 'kubernetes', False, 'the API has no Node ' + settings['node_name'],
                       'start the kubelet and join the node (its log says why it has not registered), then ' + ONBOARD)]
    node_read = node_read or {}
    root_dir = _kubelet_root_dir(_mapping(node_read.get('kubelet')).get('cmdline') or [], settings['default_kubelet_root_dir'])
    socket = _mapping(_mapping(node_read.get('stats')).get('gpu_node_join_kubelet_socket')).get('exists', False)
    allocatable = _mapping(_mapping(node.get('status')).get('allocatable'))
    shown = dict((name, _int(allocatable.get(name, '0'))) for name in expected)
    shown_ok = bool(expected) and shown == expected
    checks = [
        _check('node_registered', 'kubernetes', True, 'Node %s is registered' % settings['node_name'], ''),
        _check('kubelet_running', 'kubernetes', root_dir != '',
               ('the kubelet runs with --root-dir ' + root_dir) if root_dir
               else 'the kubelet (%s.service) is not running' % settings['kubelet_service'],
               'start the kubelet; its log says why it stopped'),
    ]
    checks += _plugin_checks(pods, plugin_current, socket, root_dir, settings)
    checks.append(_check('allocatable_gpus', 'kubernetes', shown_ok, 'Allocatable shows %s%s' % (
        json.dumps(shown), ', as the node\'s GPUs and settings give' if shown_ok else ', expected ' + json.dumps(expected)),
        'fix the first failing check below this one; the device plugin advertises only GPUs its NVML sees'))
    return checks + _label_and_taint_checks(node, settings)


def settings_disagreements(keys, names, settings):
    """The cluster-wide settings the play's hosts disagree on: one line per setting of ``keys``, naming each value
    (as JSON) and the hosts that have it. ``names`` and ``settings``: the hosts and their settings, in play order."""
    out = []
    for key in keys:
        hosts_by_value = {}
        for name, host_settings in zip(names, settings):
            hosts_by_value.setdefault(json.dumps(host_settings[key]), []).append(name)
        if len(hosts_by_value) > 1:
            out.append('%s: %s' % (key, ', '.join('%s on %s' % (value, ', '.join(hosts))
                                                  for value, hosts in hosts_by_value.items())))
    return out


def config_disagreements(keys, names, config_names, settings):
    """The per-configuration settings the play's hosts disagree on: hosts that select the same configuration of the
    plugin (``config_names``: '' for the shared one) must agree on ``keys``. One line per configuration and setting."""
    out = []
    for config in sorted(set(config_names)):
        members = [(name, host_settings) for name, config_name, host_settings in zip(names, config_names, settings)
                   if config_name == config]
        lines = settings_disagreements(keys, [member[0] for member in members], [member[1] for member in members])
        label = "configuration '%s' (gpu_node_join_device_plugin_config)" % config if config else 'the shared configuration'
        out += ['%s, %s' % (label, line) for line in lines]
    return out


def _config_label(node):
    return _mapping(_mapping(_mapping(node).get('metadata')).get('labels')).get(CONFIG_LABEL, '')


def config_selections(labelled_nodes, run_nodes):
    """{Node name: configuration name} of the Nodes outside the run (not in ``run_nodes``) that select a named
    configuration of the plugin by their C(nvidia.com/device-plugin.config) label."""
    out = {}
    for node in labelled_nodes or []:
        name = _mapping(node.get('metadata')).get('name')
        if name not in run_nodes and _config_label(node):
            out[name] = _config_label(node)
    return out


def changed_configs(live_data, data, settings):
    """The named configurations whose text this run adds or changes in the plugin's ConfigMap (the shared one, whose
    hash is in the DaemonSet's pods, is not one of them)."""
    live_data = live_data or {}
    return sorted(name for name, text in data.items()
                  if name != shared_config_key(settings) and live_data.get(name) != text)


def _rolls_every_node(key, fields, live_data, data, settings):
    stored = [field for field in fields if field not in ('labels', 'annotations')]
    if key.startswith('ConfigMap/') and stored == ['data'] and settings['named_configs']:
        shared = shared_config_key(settings)
        return (live_data or {}).get(shared) != data.get(shared)
    return bool(stored)


def rolling_changes(differences, live_data, data, settings):
    """The existing cluster-wide objects this run would change in a way that restarts the device plugin on every GPU
    node ('Kind/name', sorted): a changed spec or handler, or changed data of the shared configuration. Labels and
    annotations alone restart nothing; with named configurations, a named one's text restarts only the nodes that
    select it."""
    return sorted(key for key, fields in (differences or {}).items()
                  if _rolls_every_node(key, fields, live_data, data, settings))


def outside_selections(live_data, data, selections, settings):
    """The named configurations this run changes that Nodes outside the run select (``selections``:
    config_selections()), one line each: those nodes would run the old text until their plugin restarts, unchecked."""
    out = []
    for config in changed_configs(live_data, data, settings):
        outside = sorted(node for node, name in (selections or {}).items() if name == config)
        if outside and config in (live_data or {}):
            out.append("the device plugin configuration '%s' is also selected by %s" % (config, ', '.join(outside)))
    return out


def rollout_plugin_changes(differences, live_data, data, settings):
    """What a driver rollout's batches would change of the device plugin, one line each ('Kind/name' of an object
    that restarts the plugin on every GPU node, then each named configuration whose text changes): the batches run
    this role on each node only after its driver changed, so a rollout must find nothing of it to change."""
    return (rolling_changes(differences, live_data, data, settings)
            + ["the device plugin configuration '%s'" % name for name in changed_configs(live_data, data, settings)])


def served_target(daemonsets, node, label_prefix):
    """The plugin target ({dir, slug}) of the DaemonSet that serves ``node``, by the node's
    C(<label_prefix>/device-plugin-dir) label and that DaemonSet's device-plugins volume, as the API has them; {}
    when none does."""
    key = label_prefix + '/device-plugin-dir'
    slug = _mapping(_mapping(_mapping(node).get('metadata')).get('labels')).get(key)
    for daemonset in daemonsets or [] if slug else []:
        template = _mapping(_mapping(_mapping(daemonset).get('spec')).get('template'))
        if _mapping(_mapping(template.get('metadata')).get('labels')).get(key) != slug:
            continue
        for volume in _mapping(template.get('spec')).get('volumes') or []:
            if volume.get('name') == 'device-plugins' and _mapping(volume.get('hostPath')).get('path'):
                return {'dir': volume['hostPath']['path'], 'slug': slug}
    return {}


def plugin_restart(node, wanted, changed, settings):
    """Whether the node's device plugin pod must restart for its configuration: it selects another configuration than
    ``wanted`` ('' for the shared one) now, or this run changes the text of the one it selects (``changed``:
    changed_configs()). config-manager follows a label alone, but only to a file the kubelet has already written into
    the pod, which lags a changed ConfigMap by up to a minute; a new pod mounts the current one."""
    if not settings['named_configs']:
        return False
    return _config_label(node) != wanted or (bool(wanted) and wanted in changed)


def play_clusters(apis):
    """The play's nodes by the cluster that knows them, for one API read per cluster: [{kubeconfig, api_host, nodes}]
    from each host's {kubeconfig, api_host, node}, in play order."""
    clusters = {}
    for api in apis:
        cluster = clusters.setdefault('%s @ %s' % (api['kubeconfig'], api['api_host']),
                                      {'kubeconfig': api['kubeconfig'], 'api_host': api['api_host'], 'nodes': []})
        cluster['nodes'].append(api['node'])
    return list(clusters.values())


def _read_covering(reads, api):
    for read in reads:
        for result in (read or {}).get('results') or []:
            item = result.get('item') if isinstance(result, dict) else None
            if (item and item.get('kubeconfig') == api['kubeconfig'] and item.get('api_host') == api['api_host']
                    and api['node'] in item.get('nodes', [])):
                return result
    return {'msg': 'no read of the API covered this node'}


def read_of_host(reads, api, namespace):
    """A host's part of the play's API reads (``reads``: registered loops over play_clusters()): its Node (a list of
    one, empty when the API does not know it), its device plugin pods, the DaemonSets of another NVIDIA GPU stack
    (other than the plugin's own in ``namespace``), and why its cluster could not be read ('' when it could)."""
    result = _read_covering(reads, api)
    return {
        'nodes': [node for node in result.get('nodes') or [] if (node.get('metadata') or {}).get('name') == api['node']],
        'pods': [pod for pod in result.get('pods') or [] if (pod.get('spec') or {}).get('nodeName') == api['node']],
        'other_stacks': other_gpu_daemonsets(result.get('daemonsets') or [], namespace),
        'error': '' if 'nodes' in result else result.get('msg', 'the read failed'),
    }


def other_stacks(part, node_name):
    """Another NVIDIA GPU stack in charge of the node (``part``: read_of_host()): the GPU Operator's labels on its
    Node, and the DaemonSets of the operator or of another device plugin in the cluster."""
    node = (part.get('nodes') or [{}])[0]
    labels = operator_node_labels(_mapping(node.get('metadata')).get('labels') or {})
    managed = ['Node %s (managed by the NVIDIA GPU Operator: labels %s)'
               % (node_name, ', '.join(sorted('%s=%s' % item for item in labels.items())))] if labels else []
    return managed + list(part.get('other_stacks') or [])


def _dry_run_results(dry_run):
    outcome = dry_run.get('result')
    if isinstance(outcome, dict) and 'results' in outcome:
        return outcome['results']
    return [dry_run] if 'result' in dry_run else []


def cluster_differences(dry_run):
    """What a dry run of the cluster-wide objects (kubernetes.core.k8s, check mode with diff) would store differently,
    per existing object: {"Kind/name": [fields]} among spec, data, handler, labels and annotations. A missing object
    (nothing before) has no entry; an unchanged one (no diff) an empty list."""
    out = {}
    for result in _dry_run_results(dry_run or {}):
        diff = result.get('diff') or {}
        if diff.get('before') == {}:
            continue
        before, after = diff.get('before') or {}, diff.get('after') or {}
        stored = [field for field in ('spec', 'data', 'handler') if field in before or field in after]
        stored += [field for field in ('labels', 'annotations')
                   if field in (before.get('metadata') or {}) or field in (after.get('metadata') or {})]
        out['%s/%s' % (result['result']['kind'], result['result']['metadata']['name'])] = stored
    return out


def objects_to_apply(objects, differences):
    """The cluster-wide objects that are missing (no entry in ``differences``) or differ (a non-empty entry)."""
    return [obj for obj in objects
            if differences.get('%s/%s' % (obj['kind'], obj['metadata']['name']), ['missing'])]
