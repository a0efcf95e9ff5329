#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: pods_remove
short_description: Evict pods through the Kubernetes Eviction API (or delete them), and wait until they are gone
version_added: 0.4.0
description:
  - Removes the pods it is given, by default through the Eviction API (the C(pods/eviction) subresource), which honours
    PodDisruptionBudgets. An eviction that a budget refuses (HTTP 429) is tried again every O(delay) seconds until
    O(timeout), as C(kubectl drain) does; then the module waits, within the same O(timeout), until every evicted pod
    is gone (deleted, or replaced by another pod of the same name).
  - The Eviction is of the version the API server serves the subresource in, as its discovery document says, that is
    C(policy/v1) from Kubernetes 1.22 and C(policy/v1beta1) before.
  - O(method=delete) deletes the pods instead, which bypasses every PodDisruptionBudget.
  - Fails when a pod is left, naming it and, for a refused eviction, the PodDisruptionBudget the API server named.
  - Unlike C(kubernetes.core.k8s_drain), it removes exactly the pods it is given (a drain selects pods by labels only),
    and it neither cordons the node nor refuses pods that no controller owns.
author:
  - gpufleet maintainers (@gpufleet)
options:
  pods:
    description:
      - The pods to remove. With O(pods[].uid), a pod of the same name and another uid (a StatefulSet's replacement) is
        not touched and counts as gone.
    type: list
    elements: dict
    required: true
    suboptions:
      namespace:
        description: Namespace of the pod.
        type: str
        required: true
      name:
        description: Name of the pod.
        type: str
        required: true
      uid:
        description: The pod's C(metadata.uid).
        type: str
  method:
    description:
      - V(evict) asks the Eviction API, which refuses while a PodDisruptionBudget allows no disruption.
      - V(delete) deletes the pods, whatever their budgets say.
    type: str
    choices: [evict, delete]
    default: evict
  timeout:
    description: Seconds the removal may take in all, refused evictions tried again and the pods' termination included.
    type: int
    default: 120
  delay:
    description: Seconds between two attempts at an eviction that a budget refused.
    type: int
    default: 5
extends_documentation_fragment:
  - gpufleet.node.kube_api
attributes:
  check_mode:
    support: full
    description: Reports the pods it would remove; no API call is made.
  diff_mode:
    support: none
    description: Pods are removed, not changed; nothing to show.
  idempotent:
    support: full
    description: A pod that is already gone changes nothing.
'''

EXAMPLES = r'''
- name: Evict the GPU pods of a node, within their disruption budgets
  gpufleet.node.pods_remove:
    kubeconfig: ~/.kube/config
    pods: "{{ pods.resources | gpufleet.node.gpu_pods | map(attribute='metadata') | list }}"
    timeout: 300
  delegate_to: localhost
'''

RETURN = r'''
removed:
  description: The pods (C(namespace/name)) removed by this run, and gone.
  returned: always
  type: list
  elements: str
refused:
  description: The pods whose eviction was still refused at O(timeout), each with the budget and the API's message.
  returned: always
  type: list
  elements: dict
  contains:
    pod:
      description: C(namespace/name) of the pod.
      type: str
    budget:
      description: C(namespace/name) of the PodDisruptionBudget the API server named; empty when it named none.
      type: str
    message:
      description: What the API server answered.
      type: str
left:
  description: The pods (C(namespace/name)) evicted or deleted that were still there at O(timeout).
  returned: always
  type: list
  elements: str
eviction_version:
  description: The API version of the Evictions sent (C(policy/v1) or C(policy/v1beta1)); empty for O(method=delete).
  returned: always
  type: str
'''

import re
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible_collections.gpufleet.node.plugins.module_utils._kube_api import (
    KUBERNETES_IMPORT_ERROR,
    SESSION_ERRORS,
    ApiError,
    get,
    request,
    session,
)

# "The disruption budget gpu-guard needs 1 healthy pods and has 1 currently" (or "is still being processed").
_BUDGET = re.compile(r'disruption budget (\S+)')
_WAIT_POLL = 1


def _key(pod):
    return '%s/%s' % (pod['namespace'], pod['name'])


def _pod_path(pod):
    return '/api/v1/namespaces/%s/pods/%s' % (quote(pod['namespace'], safe=''), quote(pod['name'], safe=''))


def eviction_version(discovery):
    """The group/version of the pods/eviction subresource in the core API's discovery document (GET /api/v1)."""
    for resource in discovery.get('resources') or []:
        if resource.get('name') == 'pods/eviction' and resource.get('version'):
            return '%s/%s' % (resource.get('group', 'policy'), resource['version'])
    return 'policy/v1beta1'


def refusal(pod, body):
    """{pod, budget, message} of an eviction the API refused (HTTP 429), the budget named in its causes."""
    causes = (body.get('details') or {}).get('causes') or []
    message = '; '.join(cause.get('message', '') for cause in causes if cause.get('message')) or body.get('message', '')
    match = _BUDGET.search(message)
    return {'pod': _key(pod), 'budget': '%s/%s' % (pod['namespace'], match.group(1)) if match else '', 'message': message}


def outcome(status, body):
    """What an eviction's or deletion's answer means: accepted, gone (or replaced), refused, or error."""
    if status in (200, 201, 202):
        return 'accepted'
    if status == 404 or (status == 409 and 'precondition' in body.get('message', '').lower()):
        return 'gone'
    return 'refused' if status == 429 else 'error'


def _remove(api, pod, method, version, timeout):
    options = {'apiVersion': 'v1', 'kind': 'DeleteOptions'}
    if pod.get('uid'):
        options['preconditions'] = {'uid': pod['uid']}
    if method == 'delete':
        return request(api, 'DELETE', _pod_path(pod), timeout, body=options)
    body = {'apiVersion': version, 'kind': 'Eviction', 'metadata': {'name': pod['name'], 'namespace': pod['namespace']},
            'deleteOptions': options}
    return request(api, 'POST', _pod_path(pod) + '/eviction', timeout, body=body)


def _try_all(api, pods, params, version):
    """(accepted, refused) of one attempt at every pod; a pod already gone is neither."""
    accepted, refused = [], []
    for pod in pods:
        status, body = _remove(api, pod, params['method'], version, params['request_timeout'])
        result = outcome(status, body)
        if result == 'error':
            raise ApiError('the API answered %s to the %s of pod %s: %s'
                           % (status, 'eviction' if params['method'] == 'evict' else 'deletion', _key(pod), body.get('message', body)))
        if result == 'accepted':
            accepted.append(pod)
        elif result == 'refused':
            refused.append(refusal(pod, body))
    return accepted, refused


def _still_there(api, pod, timeout):
    found = get(api, _pod_path(pod), timeout, missing_ok=True)
    return found is not None and (not pod.get('uid') or found['metadata'].get('uid') == pod['uid'])


def _wait_gone(api, pods, deadline, timeout):
    left = list(pods)
    while left:
        left = [pod for pod in left if _still_there(api, pod, timeout)]
        if not left or time.time() >= deadline:
            break
        time.sleep(_WAIT_POLL)
    return left


def remove_pods(api, params):
    deadline = time.time() + params['timeout']
    version = eviction_version(get(api, '/api/v1', params['request_timeout'])) if params['method'] == 'evict' else ''
    pending, accepted = list(params['pods']), []
    while True:
        newly, refused = _try_all(api, pending, params, version)
        accepted += newly
        pending = [pod for pod in pending if _key(pod) in set(entry['pod'] for entry in refused)]
        if not pending or time.time() >= deadline:
            break
        time.sleep(max(0, min(params['delay'], deadline - time.time())))
    left = _wait_gone(api, accepted, deadline, params['request_timeout'])
    return {'removed': [_key(pod) for pod in accepted if pod not in left], 'refused': refused,
            'left': [_key(pod) for pod in left], 'eviction_version': version}


def _refusal_text(entry):
    who = 'PodDisruptionBudget ' + entry['budget'] if entry['budget'] else 'the API server'
    return 'pod %s: %s refused its eviction (%s)' % (entry['pod'], who, entry['message'])


def _failure(result, params):
    parts = [_refusal_text(entry) for entry in result['refused']]
    parts += ['pod %s: still there' % pod for pod in result['left']]
    return '%d pod(s) did not go within %s s: %s' % (len(parts), params['timeout'], '; '.join(parts))


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            kubeconfig=dict(type='path', required=True, no_log=False),
            context=dict(type='str'),
            pods=dict(type='list', elements='dict', required=True, options=dict(
                namespace=dict(type='str', required=True),
                name=dict(type='str', required=True),
                uid=dict(type='str'),
            )),
            method=dict(type='str', choices=['evict', 'delete'], default='evict'),
            timeout=dict(type='int', default=120),
            delay=dict(type='int', default=5),
            request_timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    if KUBERNETES_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib('kubernetes'), exception=KUBERNETES_IMPORT_ERROR)
    if module.check_mode or not module.params['pods']:
        module.exit_json(changed=bool(module.params['pods']), removed=[], refused=[], left=[], eviction_version='')
    try:
        result = remove_pods(session(module.params['kubeconfig'], module.params['context']), module.params)
    except ApiError as exc:
        module.fail_json(msg=str(exc), removed=[], refused=[], left=[], eviction_version='')
    except SESSION_ERRORS as exc:
        module.fail_json(msg='the API could not be reached: %s' % exc, removed=[], refused=[], left=[], eviction_version='')
    if result['refused'] or result['left']:
        module.fail_json(msg=_failure(result, module.params), changed=bool(result['removed']), **result)
    module.exit_json(changed=bool(result['removed']), **result)


def main():
    run_module()


if __name__ == '__main__':
    main()
