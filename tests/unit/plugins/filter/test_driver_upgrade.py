"""The rolling driver upgrade's filters: settings, window, batches, cap, disruption budgets, apt policy."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.filter.driver_upgrade import (
    FilterModule, apt_policy_versions, blocking_disruption_budgets, driver_upgrade_batches, driver_upgrade_cap,
    daemonsets_without_pause, driver_upgrade_disagreements, driver_upgrade_problems, driver_upgrade_stop,
    driver_upgrade_window, evictable_pods, gpu_pods)

GOOD = {'batch_size': 1, 'max_unavailable': '25%', 'window': {}, 'node_seconds': 900, 'drain_timeout': 300,
        'drain_delay': 5, 'pod_deletion_timeout': 120, 'gpu_pod_removal': 'evict', 'reboot': 'on_failed_reload', 'now': ''}
SATURDAY_NIGHT = {'days': ['sat'], 'start': '22:00', 'end': '04:00', 'timezone': 'Europe/Berlin'}


def test_every_filter_is_exported():
    assert set(FilterModule().filters()) == {
        'driver_upgrade_problems', 'driver_upgrade_window', 'driver_upgrade_batches', 'driver_upgrade_cap',
        'blocking_disruption_budgets', 'apt_policy_versions', 'gpu_pods', 'evictable_pods', 'driver_upgrade_stop',
        'driver_upgrade_disagreements', 'daemonsets_without_pause'}


@pytest.mark.parametrize('batch_size', [1, 3, '2', '1%', '100%', [1, '25%'], ['50%']])
def test_good_settings_have_no_problem(batch_size):
    assert driver_upgrade_problems(dict(GOOD, batch_size=batch_size)) == []


def test_gpu_pods_may_be_deleted_instead_of_evicted():
    assert driver_upgrade_problems(dict(GOOD, gpu_pod_removal='delete')) == []


@pytest.mark.parametrize('key, value, words', [
    ('batch_size', 0, ['upgrade_driver_batch_size is 0', 'positive whole number']),
    ('batch_size', '0%', ["upgrade_driver_batch_size is '0%'", '1% to 100%']),
    ('batch_size', '150%', ["'150%'"]),
    ('batch_size', [], ['upgrade_driver_batch_size is []', 'non-empty list']),
    ('batch_size', [1, 0], ['upgrade_driver_batch_size[1] is 0']),
    ('batch_size', True, ['upgrade_driver_batch_size is True']),
    ('batch_size', 'all', ["'all'"]),
    ('max_unavailable', 0, ['upgrade_driver_max_unavailable is 0']),
    ('max_unavailable', '0%', ["upgrade_driver_max_unavailable is '0%'"]),
    ('window', 'sat 22-04', ['upgrade_driver_window is', 'mapping']),
    ('window', {'start': '25:00', 'end': '04:00'}, ["upgrade_driver_window.start is '25:00'", 'HH:MM']),
    ('window', {'start': '22:00'}, ['upgrade_driver_window.end is None']),
    ('window', {'start': '22:00', 'end': '04:00', 'days': ['saturday']}, ['upgrade_driver_window.days', 'mon, tue']),
    ('window', {'start': '22:00', 'end': '04:00', 'days': []}, ['upgrade_driver_window.days is []']),
    ('window', {'start': '22:00', 'end': '04:00', 'timezone': 'Mars/Olympus'}, ["timezone is 'Mars/Olympus'"]),
    ('window', {'start': '22:00', 'end': '04:00', 'tz': 'UTC'}, ["unknown key 'tz'"]),
    ('node_seconds', 0, ['upgrade_driver_node_seconds is 0', 'seconds (1 or more)']),
    ('drain_timeout', 'soon', ["upgrade_driver_drain_timeout is 'soon'"]),
    ('drain_delay', 0, ['upgrade_driver_drain_delay is 0', 'seconds (1 or more)']),
    ('reboot', 'auto', ["upgrade_driver_reboot is 'auto'", 'on_failed_reload, always, never']),
    ('reboot_command', 'systemctl reboot', ["upgrade_driver_reboot_command is 'systemctl reboot'", 'a string is not split']),
    ('reboot_command', ['systemctl', ''], ["upgrade_driver_reboot_command is ['systemctl', '']", 'a list of words']),
    ('gpu_pod_removal', 'drain', ["upgrade_driver_gpu_pod_removal is 'drain'", 'evict, delete', 'PodDisruptionBudgets']),
    ('gpu_pod_removal', True, ['upgrade_driver_gpu_pod_removal is True', 'evict, delete']),
    ('pod_deletion_timeout', 0, ['upgrade_driver_pod_deletion_timeout is 0', 'seconds (1 or more)']),
    ('now', 'tomorrow', ["upgrade_driver_now is 'tomorrow'", 'ISO 8601']),
    ('now', '2026-12-05T23:30:00', ['upgrade_driver_now', 'offset']),
])
def test_bad_settings_are_named(key, value, words):
    problems = driver_upgrade_problems(dict(GOOD, **{key: value}))
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0]


def test_window_absent_is_always_open():
    state = driver_upgrade_window({}, '2026-12-01T12:00:00+00:00', 10 ** 6)
    assert state['configured'] is False and state['open'] and state['fits']


@pytest.mark.parametrize('now, is_open, closes_at, next_open', [
    # Saturday 2026-12-05 22:30 in Berlin (UTC+1): open until Sunday 04:00 Berlin = 03:00 UTC
    ('2026-12-05T22:30:00+01:00', True, '2026-12-06T03:00:00+00:00', '2026-12-12T21:00:00+00:00'),
    # Sunday 03:59 Berlin: still the Saturday window
    ('2026-12-06T03:59:00+01:00', True, '2026-12-06T03:00:00+00:00', '2026-12-12T21:00:00+00:00'),
    # Sunday 04:00 Berlin: closed, opens next Saturday 22:00 Berlin
    ('2026-12-06T04:00:00+01:00', False, '', '2026-12-12T21:00:00+00:00'),
    # Tuesday noon UTC: closed, opens on Saturday
    ('2026-12-01T12:00:00Z', False, '', '2026-12-05T21:00:00+00:00'),
])
def test_window_over_midnight_in_a_time_zone(now, is_open, closes_at, next_open):
    state = driver_upgrade_window(SATURDAY_NIGHT, now)
    assert (state['open'], state['closes_at'], state['next_open']) == (is_open, closes_at, next_open)


def test_window_summer_time_offset():
    # In July Berlin is UTC+2: Saturday 2026-07-04 22:00 Berlin is 20:00 UTC
    state = driver_upgrade_window(SATURDAY_NIGHT, '2026-07-04T20:30:00Z')
    assert state['open'] and state['closes_at'] == '2026-07-05T02:00:00+00:00'


@pytest.mark.parametrize('needed, fits', [(0, True), (1799, True), (1800, True), (1801, False)])
def test_a_batch_fits_only_when_it_ends_before_the_window_closes(needed, fits):
    window = {'start': '01:00', 'end': '02:00'}
    assert driver_upgrade_window(window, '2026-12-01T01:30:00Z', needed)['fits'] is fits


def test_closed_window_never_fits():
    assert driver_upgrade_window({'start': '01:00', 'end': '02:00'}, '2026-12-01T03:00:00Z', 0)['fits'] is False


def test_window_round_the_clock_on_chosen_days():
    window = {'days': ['tue'], 'start': '00:00', 'end': '00:00'}
    assert driver_upgrade_window(window, '2026-12-01T23:59:00Z')['open'] is True  # a Tuesday
    assert driver_upgrade_window(window, '2026-12-02T00:00:00Z')['open'] is False


def test_malformed_window_fails_naming_it():
    with pytest.raises(AnsibleFilterError, match='upgrade_driver_window.start'):
        driver_upgrade_window({'start': '2200', 'end': '04:00'})


@pytest.mark.parametrize('batch_size, expected', [
    (1, [['a'], ['b'], ['c'], ['d'], ['e']]),
    (2, [['a', 'b'], ['c', 'd'], ['e']]),
    ('40%', [['a', 'b'], ['c', 'd'], ['e']]),
    ('10%', [['a'], ['b'], ['c'], ['d'], ['e']]),  # int(0.5) is 0: at least one
    ([1, '50%'], [['a'], ['b', 'c'], ['d', 'e']]),
    ([1, 2, 10], [['a'], ['b', 'c'], ['d', 'e']]),
    ('100%', [['a', 'b', 'c', 'd', 'e']]),
])
def test_batches_follow_ansible_serial(batch_size, expected):
    assert driver_upgrade_batches(['a', 'b', 'c', 'd', 'e'], batch_size) == expected


def test_no_hosts_no_batches():
    assert driver_upgrade_batches([], 1) == []


@pytest.mark.parametrize('batch_size', [0, '0%', []])
def test_batches_refuse_a_size_that_upgrades_nothing_or_everything(batch_size):
    with pytest.raises(AnsibleFilterError, match='upgrade_driver_batch_size'):
        driver_upgrade_batches(['a'], batch_size)


@pytest.mark.parametrize('value, total, cap', [('25%', 3, 1), ('25%', 8, 2), ('25%', 9, 3), ('1%', 2, 1), (2, 10, 2),
                                               ('100%', 4, 4)])
def test_cap_rounds_percentages_up(value, total, cap):
    assert driver_upgrade_cap(value, total) == cap


def _pod(name, labels, namespace='default'):
    return {'metadata': {'name': name, 'namespace': namespace, 'labels': labels}}


def _budget(name, selector, allowed, namespace='default'):
    return {'metadata': {'name': name, 'namespace': namespace}, 'spec': {'selector': selector},
            'status': {'disruptionsAllowed': allowed}}


def test_blocking_budgets_are_those_that_select_a_pod_and_allow_nothing():
    pods = [_pod('web-1', {'app': 'web', 'tier': 'front'}), _pod('db-1', {'app': 'db'}, 'data')]
    budgets = [
        _budget('web-strict', {'matchLabels': {'app': 'web'}}, 0),
        _budget('web-loose', {'matchLabels': {'app': 'web'}}, 1),
        _budget('other-ns', {'matchLabels': {'app': 'web'}}, 0, 'elsewhere'),
        _budget('db-expr', {'matchExpressions': [{'key': 'app', 'operator': 'In', 'values': ['db', 'cache']}]}, 0, 'data'),
        _budget('not-front', {'matchExpressions': [{'key': 'tier', 'operator': 'NotIn', 'values': ['front']}]}, 0),
        _budget('has-tier', {'matchExpressions': [{'key': 'tier', 'operator': 'Exists'}]}, 0),
        _budget('no-tier', {'matchExpressions': [{'key': 'tier', 'operator': 'DoesNotExist'}]}, 0),
        _budget('no-selector', None, 0),
    ]
    assert blocking_disruption_budgets(pods, budgets) == ['default/web-strict', 'data/db-expr', 'default/has-tier']


APT_POLICY = """nvidia-smi:
  Installed: 535.216.03-2~bpo12+1
  Candidate: 535.216.03-2~bpo12+1
  Version table:
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
 *** 535.216.03-2~bpo12+1 1001
        100 http://deb.debian.org/debian bookworm-backports/non-free amd64 Packages
        100 /var/lib/dpkg/status
libcuda1:amd64:
  Installed: (none)
  Candidate: 535.261.03-1
  Version table:
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
"""


def test_apt_policy_versions():
    assert apt_policy_versions(APT_POLICY) == {
        'nvidia-smi': {'installed': '535.216.03-2~bpo12+1', 'candidate': '535.216.03-2~bpo12+1',
                       'versions': ['535.261.03-1', '535.216.03-2~bpo12+1']},
        'libcuda1': {'installed': '', 'candidate': '535.261.03-1', 'versions': ['535.261.03-1']},
    }


def test_apt_policy_of_an_unknown_package_is_absent():
    assert apt_policy_versions('N: Unable to locate package nvidia-nope\n') == {}


def _k8s_pod(name, limits=None, owner=None, phase='Running', mirror=False, init=False):
    container = {'name': 'c', 'resources': {'limits': limits} if limits else {}}
    spec = {'initContainers': [container], 'containers': [{'name': 'main'}]} if init else {'containers': [container]}
    meta = {'name': name, 'namespace': 'default'}
    if owner:
        meta['ownerReferences'] = [{'kind': owner, 'name': 'x'}]
    if mirror:
        meta['annotations'] = {'kubernetes.io/config.mirror': 'abc'}
    return {'metadata': meta, 'spec': spec, 'status': {'phase': phase}}


PODS = [
    _k8s_pod('train', {'nvidia.com/gpu': '1'}),
    _k8s_pod('mig', {'nvidia.com/mig-1g.10gb': '1'}, owner='ReplicaSet'),
    _k8s_pod('init-gpu', {'nvidia.com/gpu': '1'}, init=True),
    _k8s_pod('plugin', {'nvidia.com/gpu': '1'}, owner='DaemonSet'),
    _k8s_pod('done', {'nvidia.com/gpu': '1'}, phase='Succeeded'),
    _k8s_pod('web', {'cpu': '1'}, owner='ReplicaSet'),
    _k8s_pod('static', mirror=True),
    _k8s_pod('failed-web', owner='ReplicaSet', phase='Failed'),
]


def test_gpu_pods_are_the_active_ones_asking_for_nvidia_resources():
    assert [p['metadata']['name'] for p in gpu_pods(PODS)] == ['train', 'mig', 'init-gpu']


def test_evictable_pods_leave_daemonsets_mirrors_and_finished_pods():
    assert [p['metadata']['name'] for p in evictable_pods(PODS)] == ['train', 'mig', 'init-gpu', 'web']


@pytest.mark.parametrize('command', [[], ['systemctl', 'reboot'], ['/usr/local/sbin/site-reboot', '--now']])
def test_a_reboot_command_is_a_list_of_words(command):
    assert driver_upgrade_problems(dict(GOOD, reboot_command=command)) == []


def _node(name, ready='True', cordoned=None):
    spec = {} if cordoned is None else {'unschedulable': cordoned}
    return {'metadata': {'name': name}, 'spec': spec, 'status': {'conditions': [{'type': 'Ready', 'status': ready}]}}


ROLLOUT = {'stopped': '', 'failed': [], 'window': {'configured': False, 'fits': True}, 'ignore_window': False,
           'node_seconds': 900, 'max_unavailable': 1}
FLEET = [_node('n1'), _node('n2'), _node('n3'), _node('n4')]


def test_a_batch_within_the_cap_starts():
    assert driver_upgrade_stop(FLEET, ['n1'], ROLLOUT) == ''
    assert driver_upgrade_stop(FLEET, ['n1', 'n2'], dict(ROLLOUT, max_unavailable='50%')) == ''


def test_an_earlier_reason_or_failure_stops_every_later_batch():
    assert driver_upgrade_stop(FLEET, ['n2'], dict(ROLLOUT, stopped='the window closed', failed=['n1'])) == 'the window closed'
    assert driver_upgrade_stop(FLEET, ['n3'], dict(ROLLOUT, failed=['n1', 'n2'])) == 'a node of an earlier batch failed (n1, n2)'


def test_an_api_server_that_does_not_answer_stops_the_rollout():
    down = dict(ROLLOUT, api_error='Connection refused')
    assert driver_upgrade_stop([], ['n1'], down) == (
        'the API server did not answer (Connection refused), so the GPU nodes out of service could not be counted')
    assert driver_upgrade_stop([], ['n2'], dict(down, failed=['n1'])) == 'a node of an earlier batch failed (n1)'


def test_a_window_closing_before_the_batch_could_finish():
    window = {'configured': True, 'fits': False, 'closes_at': '2026-12-06T04:00:00+01:00', 'next_open': '2026-12-12T22:00:00+01:00'}
    assert driver_upgrade_stop(FLEET, ['n1'], dict(ROLLOUT, window=window)) == (
        'the maintenance window closes at 2026-12-06T04:00:00+01:00, before a batch of up to 900 s (upgrade_driver_node_seconds) '
        'could finish; it opens again at 2026-12-12T22:00:00+01:00')
    assert driver_upgrade_stop(FLEET, ['n1'], dict(ROLLOUT, window=window, ignore_window=True)) == ''


@pytest.mark.parametrize('fleet, batch, stop', [
    ([_node('n1'), _node('n2', ready='False'), _node('n3'), _node('n4')], ['n1'],
     'the batch would make 2 GPU node(s) unavailable (n2, n1), more than upgrade_driver_max_unavailable 1 allows (1 of 4)'),
    ([_node('n1'), _node('n2', cordoned=True), _node('n3', ready='Unknown'), _node('n4')], ['n1', 'n4'],
     'the batch would make 4 GPU node(s) unavailable (n2, n3, n1, n4), more than upgrade_driver_max_unavailable 1 allows (1 of 4)'),
    # an operator already cordoned the batch's node: it takes no capacity away
    ([_node('n1', cordoned=True), _node('n2', ready='False'), _node('n3'), _node('n4')], ['n1'], ''),
    # a node without a Ready condition counts as out of service
    ([_node('n1'), {'metadata': {'name': 'n2'}, 'spec': {}, 'status': {}}], ['n1'],
     'the batch would make 2 GPU node(s) unavailable (n2, n1), more than upgrade_driver_max_unavailable 1 allows (1 of 2)'),
])
def test_a_batch_over_the_cap_waits(fleet, batch, stop):
    assert driver_upgrade_stop(fleet, batch, ROLLOUT) == stop


def test_the_hosts_of_a_run_disagree_on_rollout_settings():
    upgrades = [{'batch_size': 1, 'window': {'days': ['sat'], 'start': '22:00'}, 'now': ''},
                {'batch_size': 2, 'window': {'start': '22:00', 'days': ['sat']}, 'now': ''}]
    keys = ['batch_size', 'window', 'now']
    assert driver_upgrade_disagreements(upgrades, keys) == ['upgrade_driver_batch_size']
    assert driver_upgrade_disagreements(upgrades[:1], keys) == []


PAUSE = {'key': 'gpufleet.io/device-plugin', 'operator': 'NotIn', 'values': ['paused-for-driver-upgrade']}


def _daemonset(name, terms=None):
    spec = {} if terms is None else {'affinity': {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {
        'nodeSelectorTerms': terms}}}}
    return {'metadata': {'name': name}, 'spec': {'template': {'spec': spec}}}


def test_daemonsets_that_would_keep_their_pod_on_a_paused_node():
    other = {'key': 'gpufleet.io/device-plugin-dir', 'operator': 'In', 'values': ['var-lib-kubelet-device-plugins']}
    daemonsets = [_daemonset('pauses', [{'matchExpressions': [other, PAUSE]}]),
                  _daemonset('no-affinity'),
                  _daemonset('one-term-without', [{'matchExpressions': [other, PAUSE]}, {'matchExpressions': [other]}]),
                  _daemonset('fields-only', [{'matchFields': [{'key': 'metadata.name', 'operator': 'In', 'values': ['n1']}]}])]
    assert daemonsets_without_pause(daemonsets, PAUSE) == ['no-affinity', 'one-term-without', 'fields-only']
