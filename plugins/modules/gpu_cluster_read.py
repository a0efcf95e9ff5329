#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_cluster_read
short_description: Read the Nodes, the device plugin pods and the DaemonSets of a cluster in one API session
version_added: 0.3.0
description:
  - Lists every Node (or reads the Nodes named in O(node_names)) and the pods of one label selector in one
    namespace, in one module run and one API session, so that a fleet check or a run's summary reads the cluster
    once per play instead of once or twice per node.
  - Returns the objects as the API serves them (the same fields as C(kubectl get -o json)), DaemonSets reduced to what
    tells whose they are. Read-only.
  - The kubeconfig is loaded by the kubernetes Python library (certificates, tokens, exec credential plugins, proxy).
author:
  - gpufleet maintainers (@gpufleet)
options:
  node_names:
    description:
      - The Nodes to read, by name. A Node the API does not know is left out of RV(nodes).
      - When not given, every Node is listed.
    type: list
    elements: str
    version_added: 0.4.0
  node_label_selector:
    description:
      - Read the Nodes of this label selector instead, for example V(nvidia.com/device-plugin.config) (the Nodes that carry
        the label).
    type: str
    version_added: 0.5.0
  namespace_names:
    description: Namespaces to read, by name; those the API knows are returned in RV(namespaces).
    type: list
    elements: str
    version_added: 0.4.0
  pod_namespace:
    description: Namespace of the pods. Given together with O(pod_label_selector).
    type: str
  pod_label_selector:
    description:
      - Label selector of the pods, for example V(app.kubernetes.io/name=nvidia-device-plugin).
      - When not given, no pod is read.
    type: str
  pod_field_selector:
    description: Field selector of the pods besides O(pod_label_selector), for example V(spec.nodeName=gpu-1).
    type: str
    version_added: 0.4.0
  daemonsets:
    description:
      - Also list every DaemonSet of the cluster, in RV(daemonsets), so that a play can tell whose GPU software runs
        there (another device plugin, NVIDIA's GPU Operator).
    type: bool
    default: false
    version_added: 0.4.0
extends_documentation_fragment:
  - gpufleet.node.kube_api
  - gpufleet.node.read_only
'''

EXAMPLES = r'''
- name: Read the Nodes and the device plugin pods once for the play
  gpufleet.node.gpu_cluster_read:
    kubeconfig: ~/.kube/config
    pod_namespace: kube-system
    pod_label_selector: app.kubernetes.io/name=nvidia-device-plugin
  register: cluster
  delegate_to: localhost
  run_once: true

- name: Read the Nodes of the play's hosts, as a run's summary does
  gpufleet.node.gpu_cluster_read:
    kubeconfig: ~/.kube/config
    node_names: "{{ ansible_play_hosts_all }}"
  register: summary_nodes
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
nodes:
  description: Every Node, or the Nodes of O(node_names) the API knows, or those of O(node_label_selector).
  returned: success
  type: list
  elements: dict
namespaces:
  description: The Namespaces of O(namespace_names) the API knows.
  returned: success, when O(namespace_names) is given
  type: list
  elements: dict
pods:
  description: The pods of O(pod_label_selector) in O(pod_namespace).
  returned: success, when O(pod_label_selector) is given
  type: list
  elements: dict
daemonsets:
  description:
    - Every DaemonSet of the cluster, with the fields that tell whose it is only, in the API's shape
      (C(metadata.namespace), C(metadata.name), C(metadata.labels), C(metadata.ownerReferences),
      C(spec.template.metadata.labels), C(spec.template.spec.nodeSelector), and the C(name) and C(image) of
      C(spec.template.spec.containers) and C(initContainers)).
  returned: success, when O(daemonsets) is true
  type: list
  elements: dict
  version_added: 0.4.0
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible_collections.gpufleet.node.plugins.module_utils._kube_api import (
    KUBERNETES_IMPORT_ERROR,
    SESSION_ERRORS,
    ApiError,
    get,
    session,
)


def _named(api, path, names, timeout):
    """The objects under path of these names that the API knows."""
    found = (get(api, path + '/' + quote(name, safe=''), timeout, missing_ok=True) for name in names)
    return [item for item in found if item is not None]


def _nodes(api, names, label_selector, timeout):
    if label_selector:
        return get(api, '/api/v1/nodes', timeout, {'labelSelector': label_selector})['items']
    if names is None:
        return get(api, '/api/v1/nodes', timeout)['items']
    return _named(api, '/api/v1/nodes', names, timeout)


def _daemonset_view(daemonset):
    """What tells whose a DaemonSet is: its name, labels and owners, its pods' labels, node selector and images."""
    metadata = daemonset.get('metadata') or {}
    template = (daemonset.get('spec') or {}).get('template') or {}
    pod_spec = template.get('spec') or {}
    spec = dict((kind, [{'name': container.get('name'), 'image': container.get('image')} for container in pod_spec[kind]])
                for kind in ('containers', 'initContainers') if kind in pod_spec)
    if 'nodeSelector' in pod_spec:
        spec['nodeSelector'] = pod_spec['nodeSelector']
    return {
        'metadata': dict((key, metadata[key]) for key in ('namespace', 'name', 'labels', 'ownerReferences') if key in metadata),
        'spec': {'template': {'metadata': {'labels': (template.get('metadata') or {}).get('labels') or {}}, 'spec': spec}},
    }


def read_cluster(params):
    api = session(params['kubeconfig'], params['context'])
    timeout = params['request_timeout']
    result = {'nodes': _nodes(api, params['node_names'], params['node_label_selector'], timeout)}
    if params['namespace_names'] is not None:
        result['namespaces'] = _named(api, '/api/v1/namespaces', params['namespace_names'], timeout)
    if params['pod_label_selector']:
        pods_path = '/api/v1/namespaces/%s/pods' % quote(params['pod_namespace'], safe='')
        query = {'labelSelector': params['pod_label_selector']}
        if params['pod_field_selector']:
            query['fieldSelector'] = params['pod_field_selector']
        result['pods'] = get(api, pods_path, timeout, query)['items']
    if params['daemonsets']:
        result['daemonsets'] = [_daemonset_view(item) for item in get(api, '/apis/apps/v1/daemonsets', timeout)['items']]
    return result


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            kubeconfig=dict(type='path', required=True, no_log=False),
            context=dict(type='str'),
            node_names=dict(type='list', elements='str'),
            node_label_selector=dict(type='str'),
            namespace_names=dict(type='list', elements='str'),
            pod_namespace=dict(type='str'),
            pod_label_selector=dict(type='str'),
            pod_field_selector=dict(type='str'),
            daemonsets=dict(type='bool', default=False),
            request_timeout=dict(type='int', default=30),
        ),
        required_together=[('pod_namespace', 'pod_label_selector')],
        mutually_exclusive=[('node_names', 'node_label_selector')],
        required_by={'pod_field_selector': 'pod_label_selector'},
        supports_check_mode=True,
    )
    if KUBERNETES_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib('kubernetes'), exception=KUBERNETES_IMPORT_ERROR)
    try:
        result = read_cluster(module.params)
    except ApiError as exc:
        module.fail_json(msg=str(exc))
    except SESSION_ERRORS as exc:
        module.fail_json(msg='the API could not be read: %s' % exc)
    module.exit_json(changed=False, **result)


def main():
    run_module()


if __name__ == '__main__':
    main()
