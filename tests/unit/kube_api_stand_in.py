"""A local HTTPS stand-in of the Kubernetes API for the modules that call it, and a kubeconfig that points at it."""
from __future__ import annotations

import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and logs nothing; a test's stand-in subclasses it with its paths."""

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def serve_https(folder, handler):
    """Serve ``handler`` over TLS on 127.0.0.1 with a throwaway certificate; yields (URL, certificate path)."""
    key, cert = folder / "tls.key", folder / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % server.server_address[1], cert
    server.shutdown()


def write_kubeconfig(path, server, ca, token):
    """A kubeconfig at ``path`` for the stand-in at ``server`` (its CA ``ca``), with a bearer token; returns the path."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}}],
    }))
    return str(path)
