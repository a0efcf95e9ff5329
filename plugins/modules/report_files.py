#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: report_files
short_description: Write a run's report files on the controller
version_added: 0.3.0
description:
  - Writes each of O(files) into the directory O(dest) on the controller, creating the directory when missing.
  - It is an action plugin that runs on the controller, without a module run, so a playbook writes its JSON, Markdown and
    HTML reports in one task. A file is replaced atomically and only when its content differs.
  - 'In check mode nothing is written, unless the task says C(check_mode: false).'
author:
  - gpufleet maintainers (@gpufleet)
options:
  dest:
    description: Directory of the reports on the controller.
    type: path
    required: true
  files:
    description: File names (no directories) and their text.
    type: dict
    required: true
  mode:
    description: Mode of the files.
    type: raw
    default: '0640'
  dir_mode:
    description: Mode of O(dest) when it is created.
    type: raw
    default: '0750'
attributes:
  action:
    support: full
    description: It is an action plugin that writes on the controller; no module runs on a host.
  async:
    support: none
    description: It runs on the controller in the task's own process.
  check_mode:
    support: full
    description: Reports what it would change and writes nothing.
  diff_mode:
    support: none
    description: The reports are the run's output; no diff is shown.
  idempotent:
    support: full
    description: A file is written only when its content differs.
'''

EXAMPLES = r'''
- name: Write the report as JSON and Markdown
  gpufleet.node.report_files:
    dest: reports
    files:
      report.json: "{{ report | to_nice_json }}"
      report.md: "{{ lookup('ansible.builtin.template', 'report.md.j2') }}"
  run_once: true
  check_mode: false
'''

RETURN = r'''
dest:
  description: The directory written.
  returned: always
  type: str
files:
  description: The paths of the files.
  returned: always
  type: list
  elements: str
changed_files:
  description: The names of the files whose content changed.
  returned: always
  type: list
  elements: str
'''
