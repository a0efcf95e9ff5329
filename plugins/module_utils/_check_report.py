# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The text of check.yml's report (private to gpufleet.node): the Markdown and the HTML page of check-report.*, and
the run's failure message, from the report (``nodes``: check_report_nodes, ``drift``: gpu_fleet_drift).

A value prints as the templates before these functions printed it (str(); None as nothing where it stands alone, as
'None' where joined or escaped); the HTML escapes what the nodes and the API report (names,
versions, messages) as Jinja's escape filter does, and prints the statuses, layers, fields and check ids as they are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._report_text import joined as _joined, printed as _printed

# From the host up, the columns of the HTML page.
LAYERS = ('host', 'runtime', 'kubernetes')
# As markupsafe (Jinja's escape filter) writes them; & first.
_HTML_ESCAPES = (('&', '&amp;'), ('>', '&gt;'), ('<', '&lt;'), ("'", '&#39;'), ('"', '&#34;'))

HTML_HEAD = '''<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>GPU fleet check</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #eee; }
.pass { background: #d4edda; }
.warn { background: #fff3cd; }
.fail { background: #f8d7da; font-weight: bold; }
.skip { background: #f0f0f0; }
.xid { color: #900; font-weight: bold; }
</style>
</head>
<body>
<h1>GPU fleet check</h1>
'''


def _escape(value):
    """As Jinja's escape filter: str() of the value (None included), its HTML characters escaped."""
    text = str(value)
    for character, entity in _HTML_ESCAPES:
        text = text.replace(character, entity)
    return text


def _failed(report):
    return [node for node in report['nodes'] if node['status'] == 'fail']


def _ignore_case(value):
    return value.lower() if isinstance(value, str) else value


def _by_status(nodes):
    """The nodes by status in reverse order (the failed first), by host name within a status; case ignored, as
    Jinja's sort ignores it."""
    by_host = sorted(nodes, key=lambda node: _ignore_case(node['host']))
    return sorted(by_host, key=lambda node: _ignore_case(node['status']), reverse=True)


def _counts(report):
    """How many nodes were checked, how many failed, and how many version drifts there are."""
    return len(report['nodes']), len(_failed(report)), len(report['drift']['drift'])


# --------------------------------------------------------------------------- Markdown


def _markdown_node(node):
    return '| %s | %s | %s | %s |\n' % (_printed(node['host']), _printed(node['status']), _printed(node['first_failing_layer'] or ''),
                                        _joined(node['failed_checks']))


def _markdown_start_here(node):
    xids = ''.join('\n**Critical Xid: %s**\n' % _printed(xid) for xid in node['critical_xids'])
    checks = ''.join('- `%s`: %s. Remedy: %s\n' % (_printed(check['id']), _printed(check['message']), _printed(check['remedy']))
                     for check in node['start_here'])
    return '\n## %s: start at the %s layer\n%s\n%s' % (_printed(node['host']), _printed(node['first_failing_layer']), xids, checks)


def _markdown_cell(cell):
    return '**%s** (drift)' % (cell['value'],) if cell['status'] == 'fail' else _printed(cell['value'])


def _markdown_versions(row):
    cells = ''.join('%s | ' % _markdown_cell(cell) for cell in row['cells'])
    return '| %s | %s | %s\n' % (_printed(row['host']), _printed(row['group']), cells)


def _markdown_drift(entry):
    odd = ', '.join('`%s` on %s' % (_printed(odd['value']), _printed(odd['host'])) for odd in entry['odd'])
    return '- Drift in %s: %s is `%s` on most nodes; %s\n' % (_printed(entry['group']), _printed(entry['field']),
                                                              _printed(entry['majority']), odd)


def check_report_markdown(report):
    """check-report.md: the counts, one line per node (the failed first), where to start on each failed node, and the
    versions side by side with their drift."""
    drift = report['drift']
    return ''.join([
        '# GPU fleet check\n\n%s nodes checked: %s failed, %s version drifts.\n\n' % _counts(report),
        '| node | status | start at | failed checks |\n|---|---|---|---|\n',
        ''.join(_markdown_node(node) for node in _by_status(report['nodes'])),
        ''.join(_markdown_start_here(node) for node in _failed(report)),
        '\n## Versions\n\n| node | group | %s |\n|---|---|%s\n' % (_joined(drift['fields'], ' | '), '---|' * len(drift['fields'])),
        ''.join(_markdown_versions(row) for row in drift['rows']),
        ''.join(_markdown_drift(entry) for entry in drift['drift']),
    ])


# --------------------------------------------------------------------------- HTML


def _html_check(check):
    return '<div><code>%s</code>: %s. Remedy: %s</div>' % (_printed(check['id']), _escape(check['message']), _escape(check['remedy']))


def _html_start_here(node):
    xids = ''.join('<div class="xid">Critical Xid: %s</div>' % _escape(xid) for xid in node['critical_xids'])
    if not node['first_failing_layer']:
        return xids
    return '%s%s layer: %s' % (xids, _printed(node['first_failing_layer']), ''.join(_html_check(check) for check in node['start_here']))


def _html_cell(css_class, text, attributes=''):
    return '<td class="%s"%s>%s</td>' % (_printed(css_class), attributes, text)


def _html_row(row, node):
    layers = dict((layer['name'], layer['status']) for layer in node['layers']) if node['layers'] else {}
    return ''.join([
        '<tr data-node="%s">\n' % _escape(row['host']),
        '<td>%s</td><td>%s</td>%s\n' % (_escape(row['host']), _escape(row['group']), _html_cell(node['status'], _printed(node['status']))),
        ''.join(_html_cell(layers.get(layer, 'skip'), _printed(layers.get(layer, ''))) for layer in LAYERS),
        ''.join(_html_cell(cell['status'], _escape(cell['value']), ' data-field="%s"' % _printed(cell['field'])) for cell in row['cells']),
        '<td>%s</td>\n</tr>\n' % _html_start_here(node),
    ])


def _html_drift(entry):
    odd = ', '.join('%s on %s' % (_escape(odd['value']), _escape(odd['host'])) for odd in entry['odd'])
    return '<li class="fail">%s: %s is %s on most nodes; %s</li>\n' % (_escape(entry['group']), _printed(entry['field']),
                                                                       _escape(entry['majority']), odd)


def check_report_html(report):
    """check-report.html, a self-contained page: one row per node in the drift report's order (the nodes with drift or
    failures first) with its layers, versions and where to start, a colour per status, then the drift."""
    drift = report['drift']
    nodes = dict((node['host'], node) for node in report['nodes'])
    header = ''.join('<th>%s</th>' % _printed(name) for name in list(LAYERS) + list(drift['fields']))
    text = HTML_HEAD + '<p>%s nodes checked: %s failed,\n%s version drifts.</p>\n' % _counts(report)
    text += '<table id="nodes">\n<tr><th>node</th><th>group</th><th>status</th>%s<th>start here</th></tr>\n' % header
    text += ''.join(_html_row(row, nodes[row['host']]) for row in drift['rows']) + '</table>\n'
    if drift['drift']:
        text += '<h2>Drift</h2>\n<ul>\n%s</ul>\n' % ''.join(_html_drift(entry) for entry in drift['drift'])
    return text + '</body>\n</html>\n'


# --------------------------------------------------------------------------- the failure message


def _failure_of_node(node):
    checks = '; '.join('%s (%s; remedy: %s)' % (_printed(check['id']), _printed(check['message']), _printed(check['remedy']))
                       for check in node['start_here'])
    return '%s: start at the %s layer: %s.\n' % (_printed(node['host']), _printed(node['first_failing_layer']), checks)


def _failure_of_drift(entry):
    odd = ', '.join('%s on %s' % (_printed(odd['value'] or '(none)'), _printed(odd['host'])) for odd in entry['odd'])
    return 'Drift in group %s: %s is %s on most nodes but %s.\n' % (_printed(entry['group']), _printed(entry['field']),
                                                                    _printed(entry['majority'] or '(none)'), odd)


def check_report_failure(report, report_dir):
    """Why check.yml fails: where to start on each failed node, each drift, then where the HTML report is."""
    text = ''.join(_failure_of_node(node) for node in _failed(report))
    text += ''.join(_failure_of_drift(entry) for entry in report['drift']['drift'])
    return (text + 'Report: %s/check-report.html' % _printed(report_dir)).strip()
