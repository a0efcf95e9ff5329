# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One API session from a kubeconfig, and its requests (private to gpufleet.node: gpu_cluster_read and pods_remove).

The kubeconfig is loaded by the kubernetes library (certificates, tokens, exec credential plugins, proxy); the
requests then go through urllib3 directly: the library's typed API classes cost seconds to import, and the objects
are used as the API serves them anyway."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import traceback

from ansible.module_utils.six.moves.urllib.parse import urlencode

try:
    import urllib3
    from kubernetes import config
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
    ConfigException = ValueError
    SESSION_ERRORS = (ConfigException, IOError, OSError)
else:
    KUBERNETES_IMPORT_ERROR = None
    SESSION_ERRORS = (ConfigException, urllib3.exceptions.HTTPError, IOError, OSError, ValueError)


class ApiError(Exception):
    """The API answered with an unexpected status; ``status`` and ``body`` (the parsed Status, or {}) say what."""

    def __init__(self, message, status=0, body=None):
        super(ApiError, self).__init__(message)
        self.status = status
        self.body = body or {}


def session(kubeconfig, context=None):
    """(server, pool, headers) of the kubeconfig's context."""
    settings = Configuration()
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=settings)
    tls = dict(cert_reqs='CERT_REQUIRED' if settings.verify_ssl else 'CERT_NONE', ca_certs=settings.ssl_ca_cert,
               cert_file=settings.cert_file, key_file=settings.key_file)
    pool = urllib3.ProxyManager(settings.proxy, **tls) if settings.proxy else urllib3.PoolManager(**tls)
    headers = {'Accept': 'application/json'}
    for auth in settings.auth_settings().values():
        if auth.get('in') == 'header' and auth.get('value'):
            headers[auth['key']] = auth['value']
    return settings.host.rstrip('/'), pool, headers


def request(api, method, path, timeout, query=None, body=None):
    """(status, parsed body or {}) of one request."""
    host, pool, headers = api
    url = host + path + ('?' + urlencode(query) if query else '')
    data = None
    if body is not None:
        headers = dict(headers, **{'Content-Type': 'application/json'})
        data = json.dumps(body).encode('utf-8')
    response = pool.request(method, url, body=data, headers=headers, timeout=timeout, retries=False)
    try:
        parsed = json.loads(response.data) if response.data else {}
    except ValueError:
        parsed = {'message': response.data[:300].decode('utf-8', 'replace')}
    return response.status, parsed


def get(api, path, timeout, query=None, missing_ok=False):
    """The object the API serves at path, or None for a missing one when missing_ok."""
    status, body = request(api, 'GET', path, timeout, query)
    if status == 404 and missing_ok:
        return None
    if status != 200:
        raise ApiError('the API answered %s to GET %s: %s' % (status, path, body.get('message', body)), status, body)
    return body
