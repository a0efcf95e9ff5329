"""Kubernetes lab: token file and kubeconfig rendering."""
from __future__ import annotations

import base64
import json

import pytest

from gpufleet_lab import pki
from gpufleet_lab.proc import LabError


def test_token_file_lines_and_parse_back() -> None:
    text = pki.render_token_file([
        pki.TokenUser("t1", "admin", "u1", ("system:masters",)),
        pki.TokenUser("t2", "system:kube-scheduler", "u2"),
    ])
    assert text == 't1,admin,u1,"system:masters"\nt2,system:kube-scheduler,u2\n'
    assert pki.parse_token_file(text) == {"admin": "t1", "system:kube-scheduler": "t2"}


def test_token_file_rejects_commas() -> None:
    with pytest.raises(LabError, match="must not contain"):
        pki.render_token_file([pki.TokenUser("a,b", "admin", "u")])


def test_token_kubeconfig() -> None:
    config = json.loads(pki.render_kubeconfig(cluster="lab", server="https://127.0.0.1:6443", ca_pem="CA",
                                              user="admin", token="tok"))
    assert config["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                "certificate-authority-data": base64.b64encode(b"CA").decode()}
    assert config["users"] == [{"name": "admin", "user": {"token": "tok"}}]
    assert config["current-context"] == "admin@lab"
    assert config["contexts"][0]["context"] == {"cluster": "lab", "user": "admin"}


def test_certificate_kubeconfig() -> None:
    config = json.loads(pki.render_kubeconfig(cluster="lab", server="https://x:6443", ca_pem="CA", user="n",
                                              client_cert_pem="CRT", client_key_pem="KEY"))
    assert config["users"][0]["user"] == {"client-certificate-data": base64.b64encode(b"CRT").decode(),
                                          "client-key-data": base64.b64encode(b"KEY").decode()}


@pytest.mark.parametrize("kwargs", [{}, {"token": "t", "client_cert_pem": "c", "client_key_pem": "k"},
                                    {"client_cert_pem": "c"}])
def test_kubeconfig_needs_exactly_one_credential(kwargs: dict[str, str]) -> None:
    with pytest.raises(LabError):
        pki.render_kubeconfig(cluster="lab", server="s", ca_pem="CA", user="u", **kwargs)


def test_san() -> None:
    assert pki.openssl_san(["127.0.0.1"], ["kubernetes"]) == "IP:127.0.0.1,DNS:kubernetes"
