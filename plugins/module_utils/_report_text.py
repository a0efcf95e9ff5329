# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the playbooks' reports print values (private to gpufleet.node): as the Jinja templates they replaced did."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def printed(value):
    """A value as a report prints it, as Jinja's {{ }} did: None as nothing, anything else as str() gives it."""
    return '' if value is None else str(value)


def joined(values, separator=', '):
    """Jinja's join: str() of each value, None included."""
    return separator.join(str(value) for value in values)
