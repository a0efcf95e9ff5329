"""The lab's certificates, keys, tokens and kubeconfigs (openssl CLI; real TLS, lab-only CA)."""

from __future__ import annotations

import base64
import json
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gpufleet_lab.common import write_private
from gpufleet_lab.proc import LabError, run

CA_DAYS = 3650
CERT_DAYS = 825


@dataclass(frozen=True)
class TokenUser:
    """One line of the API server's static token file."""

    token: str
    user: str
    uid: str
    groups: tuple[str, ...] = ()


def render_token_file(users: Sequence[TokenUser]) -> str:
    """``token,user,uid,"group1,group2"`` lines (kube-apiserver ``--token-auth-file``)."""
    lines = []
    for item in users:
        for value in (item.token, item.user, item.uid, *item.groups):
            if any(ch in value for ch in ',"\n'):
                raise LabError(f"token file value {value!r} must not contain ',', '\"' or newlines")
        line = f"{item.token},{item.user},{item.uid}"
        if item.groups:
            line += ',"' + ",".join(item.groups) + '"'
        lines.append(line)
    return "\n".join(lines) + "\n"


def parse_token_file(text: str) -> dict[str, str]:
    """user -> token of a static token file."""
    users: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            parts = line.split(",")
            users[parts[1]] = parts[0]
    return users


def render_kubeconfig(
    *,
    cluster: str,
    server: str,
    ca_pem: str,
    user: str,
    token: str | None = None,
    client_cert_pem: str | None = None,
    client_key_pem: str | None = None,
) -> str:
    """A kubeconfig (JSON, which every YAML reader accepts) with inline CA and credentials."""
    if (token is None) == (client_cert_pem is None):
        raise LabError("a kubeconfig needs exactly one credential: a token or a client certificate")
    if client_cert_pem is not None and client_key_pem is None:
        raise LabError("a client certificate needs its key")

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    credentials: dict[str, str] = {}
    if token is not None:
        credentials["token"] = token
    else:
        assert client_cert_pem is not None and client_key_pem is not None
        credentials["client-certificate-data"] = b64(client_cert_pem)
        credentials["client-key-data"] = b64(client_key_pem)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": f"{user}@{cluster}", "context": {"cluster": cluster, "user": user}}],
        "current-context": f"{user}@{cluster}",
        "preferences": {},
    }
    return json.dumps(config, indent=2) + "\n"


def new_token() -> str:
    return secrets.token_hex(24)


def openssl_san(ips: Sequence[str], dns: Sequence[str]) -> str:
    """``subjectAltName`` value for openssl."""
    entries = [f"IP:{ip}" for ip in ips] + [f"DNS:{name}" for name in dns]
    return ",".join(entries)


def _key(path: Path) -> None:
    run(["openssl", "genrsa", "-out", str(path), "2048"], quiet=True)
    path.chmod(0o600)


def ensure_ca(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    if (pki / "ca.crt").is_file() and (pki / "ca.key").is_file():
        return
    _key(pki / "ca.key")
    run([
        "openssl", "req", "-x509", "-new", "-key", str(pki / "ca.key"), "-sha256",
        "-days", str(CA_DAYS), "-subj", "/CN=gpufleet-lab-kubernetes-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        "-out", str(pki / "ca.crt"),
    ], quiet=True)


def ensure_cert(
    pki: Path, name: str, subject: str, *, server: bool = False, client: bool = False,
    ips: Sequence[str] = (), dns: Sequence[str] = (),
) -> tuple[Path, Path]:
    """A key pair and a certificate signed by the lab CA; kept when already there."""
    crt, key = pki / f"{name}.crt", pki / f"{name}.key"
    if crt.is_file() and key.is_file():
        return crt, key
    _key(key)
    usages = [u for u, wanted in (("serverAuth", server), ("clientAuth", client)) if wanted]
    extensions = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={','.join(usages)}",
    ]
    if ips or dns:
        extensions.append(f"subjectAltName={openssl_san(ips, dns)}")
    with tempfile.TemporaryDirectory() as tmp:
        csr = Path(tmp) / "req.csr"
        ext = Path(tmp) / "ext.cnf"
        ext.write_text("\n".join(extensions) + "\n")
        run(["openssl", "req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr)], quiet=True)
        run([
            "openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"),
            "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-sha256", "-days", str(CERT_DAYS),
            "-extfile", str(ext), "-out", str(crt),
        ], quiet=True)
    return crt, key


def ensure_service_account_keys(pki: Path) -> None:
    if (pki / "sa.key").is_file() and (pki / "sa.pub").is_file():
        return
    _key(pki / "sa.key")
    run(["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")], quiet=True)


def write_kubeconfig(path: Path, content: str) -> None:
    write_private(path, content, 0o600)
