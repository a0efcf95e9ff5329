# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the gpu_node_join role sends to the API and says (private to gpufleet.node): the device plugin's
configuration, its cluster-wide objects in the order they are applied, the smoke-test pod, and the message that names
the layer to look at when a node did not show its GPUs.

Each function takes the role's settings, one dict that roles/gpu_node_join/vars/main.yml builds from the role's
variables (``__gpu_node_join_manifest_settings``: booleans and counts already converted), and what the role found;
the role's filters (plugins/filter/gpu_node_join_manifests.py) call them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

MANAGED_BY = {'app.kubernetes.io/managed-by': 'gpufleet.node'}
POD_SECURITY_MODES = ('enforce', 'audit', 'warn')
CONFIG_DIR = '/etc/nvidia-device-plugin'
# Where the plugin serves its sockets inside its container (the kubelet's DevicePluginPath).
PLUGIN_SOCKET_DIR = '/var/lib/kubelet/device-plugins'
CDI_ROOT = '/var/run/cdi'
NO_RUNTIME_CLASS = 'none (default runtime)'
# The ConfigMap's one key without named configurations.
SINGLE_CONFIG_KEY = 'config.yaml'
# With named configurations (NVIDIA's config-manager, as NVIDIA's chart and the GPU Operator deploy it): the node label
# that selects a configuration, the key of the configuration of nodes without it, where the ConfigMap is mounted and
# where config-manager links the selected configuration for the plugin.
CONFIG_LABEL = 'nvidia.com/device-plugin.config'
DEFAULT_CONFIG = 'default'
AVAILABLE_CONFIGS_DIR = '/available-configs'
SELECTED_CONFIG_DIR = '/config'
CONFIG_MANAGER = 'nvidia-device-plugin-config-manager'
PLUGIN_CONTAINER = 'nvidia-device-plugin-ctr'
SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'
MIG_STRATEGY_LINE = re.compile(r'^[ \t]*migStrategy:[ \t]*(\S+)', re.M)


def _yaml_bool(value):
    return 'true' if value else 'false'


def plugin_needs_sys_admin(settings, mig_monitored):
    """Whether the plugin's container gets SYS_ADMIN (``mig_monitored``: whether the plugin of some node may run a MIG
    strategy, mig_monitored()).

    NVIDIA's chart adds SYS_ADMIN for volume-mounts and MIG; here also for cdi-annotations, whose runtime (cdi mode)
    applies the same envvar rule to the plugin's own NVIDIA_VISIBLE_DEVICES=all. Only the envvar strategy, whose
    runtime accepts that variable from any container, runs the plugin without any capability."""
    return settings['device_list_strategy'] != 'envvar' or mig_monitored


def config_mig_strategy(config_text):
    """The MIG strategy a configuration of the plugin sets (the plugin's default, none, when it sets none)."""
    found = MIG_STRATEGY_LINE.search(config_text or '')
    return found.group(1).strip('\'"') if found else 'none'


def mig_monitored(config_data):
    """Whether any configuration of the ConfigMap (``config_data``: config_map_data()) runs a MIG strategy: the one
    DaemonSet serves every node, so its pods get the MIG monitor devices, and SYS_ADMIN, when any node may need them
    (NVIDIA's chart decides the same from its configurations)."""
    return any(config_mig_strategy(text) != 'none' for text in config_data.values())


def time_slicing(settings):
    """Whether the plugin shares each GPU between several pods (time slicing)."""
    return settings['time_slicing_replicas'] > 0


def device_plugin_config(settings):
    """The text of the plugin's configuration for ``settings``. The sha256 of the configuration every node shares is in
    the DaemonSet's pod annotation, so a change of a single byte of it rolls every plugin pod of the fleet."""
    lines = [
        '# NVIDIA device plugin configuration, managed by gpufleet.node.gpu_node_join.',
        'version: v1',
        'flags:',
        '  migStrategy: %s' % settings['mig_strategy'],
        '  failOnInitError: true',
        '  plugin:',
        '    deviceListStrategy: %s' % settings['device_list_strategy'],
        '    deviceIDStrategy: %s' % settings['device_id_strategy'],
    ]
    if time_slicing(settings):
        lines += [
            'sharing:',
            '  timeSlicing:',
            '    renameByDefault: %s' % _yaml_bool(settings['time_slicing_rename_by_default']),
            '    failRequestsGreaterThanOne: %s' % _yaml_bool(settings['time_slicing_fail_requests_greater_than_one']),
            '    resources:',
            '      - name: nvidia.com/gpu',
            '        replicas: %d' % settings['time_slicing_replicas'],
        ]
    return '\n'.join(lines) + '\n'


def config_sha256(config_text):
    """The sha256 of the plugin's configuration text, as the DaemonSet's pod annotation carries it."""
    return hashlib.sha256(config_text.encode('utf-8')).hexdigest()


def shared_config(settings):
    """The configuration of the nodes that select no named one: with named configurations, always one without
    time-slicing and with MIG strategy none (a node shares its GPUs, or has the plugin serve MIG devices, only through a
    named configuration), so that every host knows the shared configuration, and its hash in the DaemonSet's pods, from
    the settings the fleet agrees on."""
    if not settings['named_configs']:
        return device_plugin_config(settings)
    plain = dict(settings)
    plain.update(mig_strategy='none', time_slicing_replicas=0, time_slicing_rename_by_default=False,
                 time_slicing_fail_requests_greater_than_one=False)
    return device_plugin_config(plain)


def shared_config_key(settings):
    """The ConfigMap's key of the configuration of nodes without a named one (every node without named
    configurations)."""
    return DEFAULT_CONFIG if settings['named_configs'] else SINGLE_CONFIG_KEY


def config_map_data(texts, live_data, selections, settings):
    """The ConfigMap's data: the configuration texts of the run's hosts (``texts``: {name: text}, '' for the shared
    one) over what the cluster has (``live_data``).

    Without named configurations, the one shared configuration. With them, the shared one under C(default)
    (shared_config()), the run's named ones, and those of the cluster that a Node outside the run selects
    (``selections``: {Node: name}): a run limited to some nodes keeps the other nodes' configurations, and one that
    no Node selects any more goes."""
    if not settings['named_configs']:
        return {SINGLE_CONFIG_KEY: shared_config(settings)}
    in_use = set((selections or {}).values())
    data = dict((name, text) for name, text in (live_data or {}).items() if name in in_use)
    data.update((name, text) for name, text in texts.items() if name)
    data[DEFAULT_CONFIG] = shared_config(settings)
    return data


def _toleration(taint):
    return {'key': str(taint['key']), 'operator': 'Exists', 'effect': taint['effect']}


def _pool_tolerations(settings):
    """The pool's taint and the onboarding taint, which every pod of the role tolerates."""
    return [_toleration(settings['pool_taint']), _toleration(settings['onboarding_taint'])]


def _runtime_class_name(settings):
    return {'runtimeClassName': settings['runtime_class_name']} if settings['runtime_class'] else {}


def _seccomp_default():
    return {'seccompProfile': {'type': 'RuntimeDefault'}}


def _restricted_security_context(capabilities_added=()):
    capabilities = {'drop': ['ALL']}
    if capabilities_added:
        capabilities['add'] = list(capabilities_added)
    return {'allowPrivilegeEscalation': False, 'readOnlyRootFilesystem': True, 'capabilities': capabilities}


def smoke_pod(name, node_name, resource, settings):
    """The smoke-test pod ``name-*`` (generateName) on Node ``node_name``, asking for one ``resource``."""
    spec = {'restartPolicy': 'OnFailure', 'automountServiceAccountToken': False}
    spec.update(_runtime_class_name(settings))
    spec.update({
        'securityContext': _seccomp_default(),
        'nodeSelector': {'kubernetes.io/hostname': str(node_name)},
        # a node cordoned for a driver change is tested before it takes work again
        'tolerations': _pool_tolerations(settings) + [
            {'key': 'node.kubernetes.io/unschedulable', 'operator': 'Exists', 'effect': 'NoSchedule'}],
        'containers': [{
            'name': 'smoke',
            'image': str(settings['smoke_test_image']),
            'imagePullPolicy': 'IfNotPresent',
            'command': ['nvidia-smi', '-L'],
            'securityContext': _restricted_security_context(),
            'resources': {'limits': {resource: 1}},
        }],
    })
    labels = {'app.kubernetes.io/name': 'gpu-smoke-test'}
    labels.update(MANAGED_BY)
    labels[settings['label_prefix'] + '/smoke-node'] = str(name)
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'generateName': '%s-' % name, 'namespace': settings['namespace'], 'labels': labels},
        'spec': spec,
    }


def _config_file(settings):
    """Where the plugin reads its configuration: the ConfigMap's one key, or what config-manager links."""
    return (SELECTED_CONFIG_DIR if settings['named_configs'] else CONFIG_DIR) + '/config.yaml'


def _plugin_env(mig_monitored, settings):
    env = [
        {'name': 'CONFIG_FILE', 'value': _config_file(settings)},
        # The plugin reaches NVML through the GPUs the container runtime injects into its own container.
        {'name': 'NVIDIA_VISIBLE_DEVICES', 'value': 'all'},
        {'name': 'NVIDIA_DRIVER_CAPABILITIES', 'value': 'compute,utility'},
    ]
    if mig_monitored:
        env.append({'name': 'NVIDIA_MIG_MONITOR_DEVICES', 'value': 'all'})
    env += [{'name': str(name), 'value': str(value)} for name, value in settings['extra_env'].items()]
    return env


def _cdi_annotations(settings):
    return settings['device_list_strategy'] == 'cdi-annotations'


def _config_mounts(settings):
    if not settings['named_configs']:
        return [{'name': 'config', 'mountPath': CONFIG_DIR, 'readOnly': True}]
    return [{'name': 'available-configs', 'mountPath': AVAILABLE_CONFIGS_DIR, 'readOnly': True},
            {'name': 'selected-config', 'mountPath': SELECTED_CONFIG_DIR}]


def _plugin_volume_mounts(settings):
    mounts = [{'name': 'device-plugins', 'mountPath': PLUGIN_SOCKET_DIR}] + _config_mounts(settings)
    if _cdi_annotations(settings):
        mounts.append({'name': 'cdi-root', 'mountPath': CDI_ROOT})
    mounts += [{'name': str(volume['name']), 'mountPath': str(volume['mount_path']), 'readOnly': True}
               for volume in settings['extra_volumes']]
    return mounts


def _service_account_token_volume():
    """The ServiceAccount's token, the API's CA and the namespace, as the kubelet mounts them when it mounts a token:
    here only config-manager's containers mount them."""
    return {'name': 'config-manager-token', 'projected': {'sources': [
        {'serviceAccountToken': {'path': 'token', 'expirationSeconds': 3607}},
        {'configMap': {'name': 'kube-root-ca.crt', 'items': [{'key': 'ca.crt', 'path': 'ca.crt'}]}},
        {'downwardAPI': {'items': [{'path': 'namespace', 'fieldRef': {'fieldPath': 'metadata.namespace'}}]}},
    ]}}


def _config_volumes(settings):
    if not settings['named_configs']:
        return [{'name': 'config', 'configMap': {'name': settings['config_name']}}]
    return [{'name': 'available-configs', 'configMap': {'name': settings['config_name']}},
            {'name': 'selected-config', 'emptyDir': {}},
            _service_account_token_volume()]


def _plugin_volumes(plugin_dir, settings):
    volumes = [{'name': 'device-plugins', 'hostPath': {'path': str(plugin_dir), 'type': 'Directory'}}]
    volumes += _config_volumes(settings)
    if _cdi_annotations(settings):
        # The plugin writes the CDI spec of the devices it advertises here; the runtime resolves its annotations here.
        volumes.append({'name': 'cdi-root', 'hostPath': {'path': CDI_ROOT, 'type': 'DirectoryOrCreate'}})
    volumes += [{'name': str(volume['name']), 'hostPath': {'path': str(volume['host_path']), 'type': 'Directory'}}
                for volume in settings['extra_volumes']]
    return volumes


def _plugin_container(mig_monitored, settings):
    # The runtime treats a container with CAP_SYS_ADMIN in its bounding set as privileged: only then does it honour
    # the plugin's own NVIDIA_VISIBLE_DEVICES=all (and MIG monitor devices) when it refuses that variable from
    # unprivileged containers.
    capabilities_added = ['SYS_ADMIN'] if plugin_needs_sys_admin(settings, mig_monitored) else []
    return {
        'name': PLUGIN_CONTAINER,
        'image': str(settings['image']),
        'imagePullPolicy': settings['pull_policy'],
        'env': _plugin_env(mig_monitored, settings),
        'securityContext': _restricted_security_context(capabilities_added),
        'resources': {'requests': {'cpu': '10m', 'memory': '32Mi'}, 'limits': {'memory': '256Mi'}},
        'volumeMounts': _plugin_volume_mounts(settings),
    }


def _config_manager_env(oneshot, settings):
    """NVIDIA's config-manager, as NVIDIA's chart runs it: once before the plugin starts (``oneshot``), then beside it,
    linking the configuration the node's label selects and sending the plugin SIGHUP when it changes."""
    env = [
        {'name': 'ONESHOT', 'value': _yaml_bool(oneshot)},
        {'name': 'KUBECONFIG', 'value': ''},
        {'name': 'NODE_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'spec.nodeName'}}},
        {'name': 'NODE_LABEL', 'value': CONFIG_LABEL},
        {'name': 'CONFIG_FILE_SRCDIR', 'value': AVAILABLE_CONFIGS_DIR},
        {'name': 'CONFIG_FILE_DST', 'value': SELECTED_CONFIG_DIR + '/config.yaml'},
        {'name': 'DEFAULT_CONFIG', 'value': DEFAULT_CONFIG},
        {'name': 'FALLBACK_STRATEGIES', 'value': 'named'},
        {'name': 'SEND_SIGNAL', 'value': _yaml_bool(not oneshot)},
        {'name': 'SIGNAL', 'value': '1' if not oneshot else ''},  # SIGHUP: the plugin restarts with the new file
        {'name': 'PROCESS_TO_SIGNAL', 'value': 'nvidia-device-plugin' if not oneshot else ''},
        # it needs no GPU: the runtime injects none
        {'name': 'NVIDIA_VISIBLE_DEVICES', 'value': 'void'},
    ]
    api_server = settings['config_manager_api_server']
    if api_server:
        host, port = api_server.rsplit(':', 1)
        env += [{'name': 'KUBERNETES_SERVICE_HOST', 'value': host.strip('[]')},
                {'name': 'KUBERNETES_SERVICE_PORT', 'value': port}]
    return env


def _config_manager_container(name, oneshot, settings):
    return {
        'name': name,
        'image': str(settings['image']),
        'imagePullPolicy': settings['pull_policy'],
        'command': ['config-manager'],
        'env': _config_manager_env(oneshot, settings),
        'securityContext': _restricted_security_context(),
        'resources': {'requests': {'cpu': '5m', 'memory': '16Mi'}, 'limits': {'memory': '64Mi'}},
        'volumeMounts': _config_mounts(settings) + [
            {'name': 'config-manager-token', 'mountPath': SERVICE_ACCOUNT_DIR, 'readOnly': True}],
    }


def _not_paused(settings):
    """The node affinity that keeps the plugin off a node under a driver change (playbooks/upgrade_driver.yml labels
    it): the DaemonSet controller removes the pod, which no longer holds the driver, and brings it back afterwards."""
    pause_label = settings['pause_label']
    expression = {'key': pause_label['key'], 'operator': 'NotIn', 'values': [str(pause_label['value'])]}
    return {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {
        'nodeSelectorTerms': [{'matchExpressions': [expression]}]}}}


def daemonset_name(slug):
    """The DaemonSet of the plugin for the nodes whose kubelet serves its sockets in the directory ``slug`` names."""
    return 'nvidia-device-plugin-' + re.sub('[^a-z0-9-]', '-', slug.lower())


def daemonset(target, config_hash, mig_monitored, settings):
    """The plugin's DaemonSet for ``target`` (C(dir): the kubelet's device-plugins directory on its nodes, C(slug): the
    label value that names it), its pods annotated with ``config_hash`` (the sha256 of the shared configuration) and
    ready for MIG devices when ``mig_monitored`` (mig_monitored())."""
    dir_label = settings['label_prefix'] + '/device-plugin-dir'
    pod_labels = {'app.kubernetes.io/name': settings['app_label'], dir_label: str(target['slug'])}
    node_selector = dict(settings['pool_labels'])
    node_selector[dir_label] = target['slug']
    pod_spec = {
        'priorityClassName': 'system-node-critical',
        'automountServiceAccountToken': False,
        'securityContext': _seccomp_default(),
    }
    pod_spec.update(_runtime_class_name(settings))
    pod_spec.update({
        'nodeSelector': node_selector,
        'affinity': _not_paused(settings),
        'tolerations': _pool_tolerations(settings),
        'containers': [_plugin_container(mig_monitored, settings)],
        'volumes': _plugin_volumes(target['dir'], settings),
    })
    if settings['named_configs']:
        # config-manager signals the plugin across containers; its token is mounted into its own containers only
        pod_spec.update({
            'serviceAccountName': CONFIG_MANAGER,
            'shareProcessNamespace': True,
            'initContainers': [_config_manager_container('nvidia-device-plugin-init', True, settings)],
        })
        pod_spec['containers'].append(_config_manager_container('nvidia-device-plugin-sidecar', False, settings))
    labels = {'app.kubernetes.io/name': settings['app_label']}
    labels.update(MANAGED_BY)
    return {
        'apiVersion': 'apps/v1',
        'kind': 'DaemonSet',
        'metadata': {'name': daemonset_name(target['slug']), 'namespace': settings['namespace'], 'labels': labels},
        'spec': {
            'selector': {'matchLabels': dict(pod_labels)},
            'updateStrategy': {'type': 'RollingUpdate'},
            'template': {
                'metadata': {'labels': pod_labels,
                             'annotations': {settings['label_prefix'] + '/config-sha256': config_hash}},
                'spec': pod_spec,
            },
        },
    }


def namespace(settings):
    """The plugin's namespace, labelled with the Pod Security level the plugin needs (enforce, audit and warn)."""
    labels = dict(MANAGED_BY)
    for mode in POD_SECURITY_MODES:
        labels['pod-security.kubernetes.io/' + mode] = settings['pod_security_level']
    return {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': settings['namespace'], 'labels': labels}}


def runtime_class(settings):
    """The RuntimeClass that runs pods with containerd's NVIDIA runtime handler."""
    return {
        'apiVersion': 'node.k8s.io/v1',
        'kind': 'RuntimeClass',
        'metadata': {'name': settings['runtime_class_name'], 'labels': dict(MANAGED_BY)},
        'handler': settings['runtime_handler'],
    }


def config_map(data, settings):
    """The ConfigMap that holds the plugin's configurations (config_map_data())."""
    metadata = {'name': settings['config_name'], 'namespace': settings['namespace'], 'labels': dict(MANAGED_BY)}
    return {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': metadata, 'data': dict(data)}


def config_manager_access(settings):
    """config-manager's identity: a ServiceAccount that may read Nodes (its own node's label), nothing else."""
    labels = dict(MANAGED_BY)
    cluster_name = 'gpufleet:%s:%s' % (settings['namespace'], CONFIG_MANAGER)
    return [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount', 'automountServiceAccountToken': False,
         'metadata': {'name': CONFIG_MANAGER, 'namespace': settings['namespace'], 'labels': labels}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRole',
         'metadata': {'name': cluster_name, 'labels': labels},
         'rules': [{'apiGroups': [''], 'resources': ['nodes'], 'verbs': ['get', 'list', 'watch']}]},
        {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRoleBinding',
         'metadata': {'name': cluster_name, 'labels': labels},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole', 'name': cluster_name},
         'subjects': [{'kind': 'ServiceAccount', 'name': CONFIG_MANAGER, 'namespace': settings['namespace']}]},
    ]


def cluster_objects(targets, config_data, settings):
    """The plugin's cluster-wide objects, in the order they are applied: its namespace, the RuntimeClass (when the
    role makes one), config-manager's identity (with named configurations), its configurations (``config_data``:
    config_map_data()), and one DaemonSet per target (see daemonset), annotated with the shared configuration's
    sha256."""
    objects = [namespace(settings)]
    if settings['runtime_class']:
        objects.append(runtime_class(settings))
    if settings['named_configs']:
        objects += config_manager_access(settings)
    objects.append(config_map(config_data, settings))
    config_hash = config_sha256(config_data[shared_config_key(settings)])
    objects += [daemonset(target, config_hash, mig_monitored(config_data), settings) for target in targets]
    return objects


def _mapping(value):
    return value if isinstance(value, dict) else {}


def _gpu_resources(resources):
    return dict((name, count) for name, count in resources.items() if re.match('nvidia.com/', name))


def _runtime_class_in_use(settings):
    return settings['runtime_class_name'] if settings['runtime_class'] else NO_RUNTIME_CLASS


def _pod_line(pod):
    """The pod's phase and the state of each of its containers."""
    status = _mapping(pod.get('status'))
    containers = ''.join(', container %s ready=%s state=%s' % (container['name'], container['ready'], json.dumps(container['state']))
                         for container in status.get('containerStatuses', []))
    return 'Device plugin pod %s: phase %s%s.' % (pod['metadata']['name'], status.get('phase', '?'), containers)


def _scheduling_layer(settings):
    return ("Layer: device plugin scheduling. No device plugin pod was created on the node: check that the DaemonSet's "
            "nodeSelector\n(%s) matches the node's labels and that it tolerates every NoSchedule taint the node carries."
            % json.dumps(settings['pool_labels']))


def _registration_layer(waited, settings):
    return ("Layer: kubelet device plugin registration. The plugin runs but the kubelet shows no GPUs from it: the plugin "
            "mounts\n%s, where the kubelet (--root-dir %s) serves kubelet.sock;\ncheck the plugin's log for its "
            "registration with the kubelet and for NVML errors (RuntimeClass %s)."
            % (waited['plugin_dir'], waited['kubelet_root_dir'], _runtime_class_in_use(settings)))


def _plugin_capabilities(pod):
    """The capabilities the pod's plugin container adds, as the API has its spec."""
    for container in _mapping(pod.get('spec')).get('containers') or []:
        if container.get('name') == PLUGIN_CONTAINER:
            added = _mapping(_mapping(container.get('securityContext')).get('capabilities')).get('add') or []
            return ', '.join('CAP_' + str(name) for name in added) or 'no capabilities'
    return 'capabilities not read'


def _plugin_layer(pod, waited, settings):
    capabilities = _plugin_capabilities(pod)
    return ("Layer: device plugin. No pod of the current template (image %s, configuration\n%s) is Ready on the node: an "
            "image that cannot be pulled, a rolling update stuck on another node, a\nmissing host directory, or a plugin "
            "that cannot initialise NVML because the container runtime gave its own container no GPU\n(RuntimeClass %s; "
            "device-list strategy\n%s; the plugin runs with %s\nand NVIDIA_VISIBLE_DEVICES=all, which the runtime honours "
            "only for a container it treats as privileged unless\naccept-nvidia-visible-devices-envvar-when-unprivileged "
            "is true)."
            % (settings['image'], waited['config_sha256'][:12], _runtime_class_in_use(settings),
               settings['device_list_strategy'], capabilities))


def diagnosis(pods, node, log_lines, plugin_current, waited, settings):
    """Why a node did not show its GPUs within the wait, naming the layer to look at.

    ``pods``: the device plugin pods on the node; ``node``: its Node ({} when the API does not know it); ``log_lines``:
    the last log lines of the first pod; ``plugin_current``: whether a pod of the DaemonSet's current template is Ready
    there; ``waited``: C(node_name), C(timeout), C(expected) (the GPU resources the Node must show), C(plugin_dir),
    C(kubelet_root_dir) and C(config_sha256)."""
    allocatable = _mapping(node.get('status')).get('allocatable') or {}
    lines = [
        '%s did not show its GPUs within %ss; it keeps the taint %s.'
        % (waited['node_name'], waited['timeout'], settings['onboarding_taint']['key']),
        'Expected: %s; Allocatable: %s.' % (json.dumps(waited['expected']), json.dumps(_gpu_resources(allocatable))),
    ]
    if not pods:
        lines.append(_scheduling_layer(settings))
    else:
        lines.append(_pod_line(pods[0]))
        lines.append(_registration_layer(waited, settings) if plugin_current else _plugin_layer(pods[0], waited, settings))
        lines.append('Last log lines: %s' % ' | '.join(str(line) for line in log_lines))
    return '\n'.join(lines).strip()
