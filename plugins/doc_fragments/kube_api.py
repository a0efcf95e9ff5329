# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options of the collection's modules that call the Kubernetes API (module_utils/_kube_api.py)."""

    DOCUMENTATION = r'''
requirements:
  - kubernetes (Python library)
options:
  kubeconfig:
    description: Kubeconfig file. Its content is never logged.
    type: path
    required: true
  context:
    description: Context of the kubeconfig; its current context when not given.
    type: str
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
'''
