# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU utilisation report as Markdown, as a self-contained HTML page with a chart per node, and the report
playbook's failure message (private to gpufleet.node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from html import escape

CHART_WIDTH, CHART_HEIGHT = 720, 120


def _number(value, suffix=''):
    return '(no data)' if value is None else '%s%s' % (value, suffix)


def _cell(value):
    return str(value).replace('|', '\\|').replace('\n', ' ')


def _table(header, rows):
    text = '| %s |\n|%s\n' % (' | '.join(header), '---|' * len(header))
    return text + ''.join('| %s |\n' % ' | '.join(_cell(value) for value in row) for row in rows)


def _money(report, value):
    return ('%.2f %s' % (value, report['currency'])).strip()


def _workload_rows(report):
    return [[row['namespace'], row['pod'], ', '.join(row['nodes']), row['gpus_allocated'], row['gpu_hours'],
             _number(row['util_mean'], ' %'), _number(row['util_p95'], ' %'), _number(row['mem_mean'], ' %'),
             _number(row['mem_p95'], ' %'), _money(report, row['cost'])] for row in report['workloads']]


def _namespace_rows(report):
    return [[row['namespace'], row['gpus_allocated'], '' if row['quota'] is None else row['quota'], row['gpu_hours'],
             _number(row['util_mean'], ' %'), _money(report, row['cost']), row['workloads_under_threshold']]
            for row in report['namespaces']]


def _node_rows(report):
    return [[row['node'], row['gpus'], row['gpu_hours'], row['idle_gpu_hours'], _number(row['util_mean'], ' %'),
             _number(row['mem_mean'], ' %')] for row in report['nodes']]


WORKLOAD_HEADER = ['namespace', 'pod', 'nodes', 'GPUs now', 'GPU-hours', 'compute mean', 'compute p95', 'memory mean',
                   'memory p95', 'cost']
NAMESPACE_HEADER = ['namespace', 'GPUs now', 'quota', 'GPU-hours', 'compute mean', 'cost', 'under threshold']
NODE_HEADER = ['node', 'GPUs', 'GPU-hours', 'idle GPU-hours', 'compute mean', 'memory mean']


def _summary(report):
    totals = report['totals']
    return ('Over the %s hours to %s: %s GPUs, %s GPU-hours (%s idle, no pod), compute %s on average, %s; %s workloads '
            'under %s %% compute.' % (report['window']['hours'], report['window']['end'] or 'now', totals['gpus'],
                                      totals['gpu_hours'], totals['idle_gpu_hours'], _number(totals['util_mean'], ' %'),
                                      _money(report, totals['cost']), len(report['flagged']), report['threshold_percent']))


def usage_report_markdown(report):
    """gpu-usage-report.md."""
    text = '# GPU utilisation\n\n'
    if report['problems']:
        return text + 'No figures: a source failed.\n\n' + ''.join('- %s\n' % problem for problem in report['problems'])
    text += _summary(report) + '\n\n## Under the threshold\n\n'
    flagged = [[row['namespace'], row['pod'], _number(row['util_mean'], ' %'), _number(row['mem_mean'], ' %'),
                row['gpu_hours'], _money(report, row['cost']), row['suggestion']] for row in report['flagged']]
    text += _table(['namespace', 'pod', 'compute mean', 'memory mean', 'GPU-hours', 'cost', 'suggestion'], flagged) if flagged \
        else 'None.\n'
    text += '\n## Namespaces\n\n' + _table(NAMESPACE_HEADER, _namespace_rows(report))
    text += '\n## Workloads\n\n' + _table(WORKLOAD_HEADER, _workload_rows(report))
    text += '\n## Nodes\n\n' + _table(NODE_HEADER, _node_rows(report))
    if report['no_data']:
        text += '\n## Pods holding GPUs without data\n\nNot counted as idle: dcgm-exporter reported no series for them.\n\n'
        rows = [[row['namespace'], row['pod'], row['node'], row['gpus']] for row in report['no_data']]
        text += _table(['namespace', 'pod', 'node', 'GPUs'], rows)
    return text


HTML_HEAD = '''<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>GPU utilisation</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }
td.under { background: #fde2e1; }
svg { background: #fafafa; border: 1px solid #ddd; }
polyline { fill: none; stroke: #2b6cb0; stroke-width: 1.5; }
line.threshold { stroke: #c53030; stroke-dasharray: 4 3; }
</style>
</head>
<body>
<h1>GPU utilisation</h1>
'''


def _html_table(header, rows, under=()):
    text = '<table>\n<tr>%s</tr>\n' % ''.join('<th>%s</th>' % escape(name) for name in header)
    for index, row in enumerate(rows):
        css = ' class="under"' if index in under else ''
        text += '<tr>%s</tr>\n' % ''.join('<td%s>%s</td>' % (css, escape(str(value))) for value in row)
    return text + '</table>\n'


def _chart(node, report):
    points = node['hourly']
    if not points:
        return '<p>No hourly data.</p>\n'
    start, end = points[0][0], max(points[-1][0], points[0][0] + 1)

    def x(timestamp):
        return round((timestamp - start) * CHART_WIDTH / (end - start), 1)

    def y(percent):
        return round(CHART_HEIGHT - percent * CHART_HEIGHT / 100.0, 1)

    line = ' '.join('%s,%s' % (x(timestamp), y(value)) for timestamp, value in points)
    limit = y(report['threshold_percent'])
    return ('<svg data-node="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="hourly compute of %s">'
            '<line class="threshold" x1="0" y1="%s" x2="%d" y2="%s"/><polyline points="%s"/></svg>\n'
            % (escape(node['node']), CHART_WIDTH, CHART_HEIGHT, CHART_WIDTH, CHART_HEIGHT, escape(node['node']), limit,
               CHART_WIDTH, limit, line))


def usage_report_html(report):
    """gpu-usage-report.html: the summary, the tables and, per node, its GPUs' mean compute per hour over the window
    against the threshold (inline SVG; the page needs nothing else)."""
    if report['problems']:
        return HTML_HEAD + '<p>No figures: a source failed.</p>\n<ul>\n%s</ul>\n</body>\n</html>\n' % ''.join(
            '<li>%s</li>\n' % escape(problem) for problem in report['problems'])
    under = set(index for index, row in enumerate(report['workloads']) if row['under_threshold'])
    text = HTML_HEAD + '<p>%s</p>\n' % escape(_summary(report))
    text += '<h2>Workloads</h2>\n' + _html_table(WORKLOAD_HEADER + ['suggestion'], [
        values + [row['suggestion']] for values, row in zip(_workload_rows(report), report['workloads'])], under)
    text += '<h2>Namespaces</h2>\n' + _html_table(NAMESPACE_HEADER, _namespace_rows(report))
    text += '<h2>Nodes</h2>\n' + _html_table(NODE_HEADER, _node_rows(report))
    for node in report['nodes']:
        text += '<h3>%s: mean compute per hour (dashed: %s %%)</h3>\n%s' % (
            escape(node['node']), report['threshold_percent'], _chart(node, report))
    return text + '</body>\n</html>\n'


def usage_report_failure(report, report_dir):
    """Why the report playbook fails: each source that failed, then where the report is."""
    return ('The GPU utilisation report has no figures: %s. Report: %s/gpu-usage-report.md'
            % ('; '.join(report['problems']), report_dir))
