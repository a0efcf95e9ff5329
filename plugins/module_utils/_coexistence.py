# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Another NVIDIA GPU stack in the cluster: NVIDIA's GPU Operator on a node, its operands, and NVIDIA device plugins
that gpufleet.node did not deploy (private to gpufleet.node: filters use it).

The GPU Operator marks every node it manages with ``nvidia.com/gpu.deploy.<operand>`` labels, and each operand's
DaemonSet (owned by its ClusterPolicy or NVIDIADriver) selects nodes by one of them; ``nvidia.com/gpu.deploy.operands
=false`` takes a node out of its hands. NVIDIA's device plugin, from its Helm chart, its static manifest or the
operator, runs the image ``<registry>/nvidia/k8s-device-plugin``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

OPERATOR_LABEL_PREFIX = 'nvidia.com/gpu.deploy.'
OPERATOR_OPT_OUT_LABEL = 'nvidia.com/gpu.deploy.operands'
OPERATOR_OWNER_KINDS = ('ClusterPolicy', 'NVIDIADriver')
PLUGIN_IMAGE_NAME = 'k8s-device-plugin'
# The labels of NVIDIA's device plugin DaemonSets: Helm chart, GPU Operator, static manifest.
PLUGIN_LABELS = (('app.kubernetes.io/name', 'nvidia-device-plugin'), ('app', 'nvidia-device-plugin-daemonset'),
                 ('name', 'nvidia-device-plugin-ds'))
OWN_LABELS = {'app.kubernetes.io/name': 'nvidia-device-plugin', 'app.kubernetes.io/managed-by': 'gpufleet.node'}


def operator_node_labels(labels):
    """The node's ``nvidia.com/gpu.deploy.*`` labels by which the GPU Operator deploys its operands there; {} for a
    node without them or opted out (``nvidia.com/gpu.deploy.operands=false``). A value other than ``false``
    (``true``, or the operator's own ``paused-for-driver-upgrade``) keeps the operand the operator's."""
    labels = labels or {}
    if labels.get(OPERATOR_OPT_OUT_LABEL) == 'false':
        return {}
    return dict((key, value) for key, value in labels.items() if key.startswith(OPERATOR_LABEL_PREFIX) and value != 'false')


def _labels_text(labels):
    return ', '.join('%s=%s' % item for item in sorted((labels or {}).items())) or 'none'


def _image_name(image):
    """The last path component of an image reference, without tag or digest."""
    name = image.split('@', 1)[0].rsplit('/', 1)[-1]
    return name.split(':', 1)[0]


def _pod_spec(daemonset):
    return ((daemonset.get('spec') or {}).get('template') or {}).get('spec') or {}


def _operator_reasons(daemonset):
    owners = ['owned by %s/%s' % (owner.get('kind'), owner.get('name'))
              for owner in (daemonset.get('metadata') or {}).get('ownerReferences') or []
              if owner.get('kind') in OPERATOR_OWNER_KINDS and str(owner.get('apiVersion', '')).startswith('nvidia.com/')]
    selects = ['runs on nodes labelled %s=%s' % item for item in sorted((_pod_spec(daemonset).get('nodeSelector') or {}).items())
               if item[0].startswith(OPERATOR_LABEL_PREFIX)]
    return owners + selects


def _plugin_reasons(daemonset):
    spec = _pod_spec(daemonset)
    images = sorted(set(container.get('image', '') for container in (spec.get('containers') or []) + (spec.get('initContainers') or [])
                        if _image_name(container.get('image', '')) == PLUGIN_IMAGE_NAME))
    labels = dict((((daemonset.get('spec') or {}).get('template') or {}).get('metadata') or {}).get('labels') or {})
    labels.update((daemonset.get('metadata') or {}).get('labels') or {})
    return ['image %s' % image for image in images] + ['label %s=%s' % pair for pair in PLUGIN_LABELS if labels.get(pair[0]) == pair[1]]


def _is_own(metadata, namespace):
    labels = metadata.get('labels') or {}
    return metadata.get('namespace') == namespace and all(labels.get(key) == value for key, value in OWN_LABELS.items())


def other_gpu_daemonsets(daemonsets, own_namespace):
    """One line per DaemonSet of another NVIDIA GPU stack: a GPU Operator operand, or an NVIDIA device plugin that is
    not gpufleet.node's own (its labels, in ``own_namespace``), naming ``namespace/name``, why and its labels."""
    found = []
    for daemonset in daemonsets or []:
        metadata = daemonset.get('metadata') or {}
        if _is_own(metadata, own_namespace):
            continue
        kind, reasons = 'a GPU Operator operand', _operator_reasons(daemonset)
        if not reasons:
            kind, reasons = 'another NVIDIA device plugin', _plugin_reasons(daemonset)
        if reasons:
            found.append('DaemonSet %s/%s (%s: %s; labels %s)' % (
                metadata.get('namespace'), metadata.get('name'), kind, ', '.join(reasons), _labels_text(metadata.get('labels'))))
    return found
