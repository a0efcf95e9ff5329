#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: validate_settings
short_description: Check a role's settings against its argument spec and the rules between them
version_added: 0.4.0
description:
  - Reads the variables of the role's C(main) entry point as the host sees them (inventory, play, role defaults) and
    checks them against the role's C(meta/argument_specs.yml) and against the rules between the settings that an
    argument spec cannot express (a version given as a YAML number, a label value that is not a string, a regular
    expression that does not compile, a repository URL without TLS, ...).
  - Fails with every problem found, each naming the variable, its value and what is allowed.
  - It is an action plugin that runs on the controller; nothing runs on, or changes, the host. The roles run it in
    their preflight, and the collection's playbooks in a validation play before any change (entry point C(validate)
    of each role).
author:
  - gpufleet maintainers (@gpufleet)
options:
  role:
    description: The role whose settings are checked.
    type: str
    required: true
    choices: [container_toolkit, containerd_nvidia, gpu_node_join, gpu_self_check, nvidia_driver]
  context:
    description:
      - The role's platform data the rules need, from its C(vars/) (supported platforms, CDI directories, ...).
    type: dict
    default: {}
attributes:
  action:
    support: full
    description: It is an action plugin that runs on the controller; no module runs on a host.
  async:
    support: none
    description: It runs on the controller in the task's own process.
  check_mode:
    support: full
    description: It changes nothing, in check mode or not.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  idempotent:
    support: full
    description: It only reads.
'''

EXAMPLES = r'''
- name: Check the settings of the driver role (inside the role, or with its variables in scope)
  gpufleet.node.validate_settings:
    role: nvidia_driver
    context:
      supported_platforms: {Debian: ["12", "13"], Ubuntu: ["22", "24"]}
      supported_architectures: [x86_64, aarch64]
'''

RETURN = r'''
role:
  description: The role checked.
  returned: always
  type: str
problems:
  description: Every problem found; empty when the settings are valid.
  returned: always
  type: list
  elements: str
'''
