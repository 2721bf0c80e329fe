"""TLS between etcd members for ``yak up --secure``: a peer certificate and the flags.

etcd's peer port carries the raft log — every write of the cluster — and takes snapshots and
membership changes. Plain, anyone who reaches it can pose as a member (the cluster id is no
secret) and read the stream. In secure mode every member serves and dials its peers over TLS
with one certificate of the cluster's local CA, demands a certificate from every peer
(``--peer-client-cert-auth``) and takes only the certificate whose CN is ``yak-etcd-peer``
(``--peer-cert-allowed-cn``): the users' mTLS certificates come from the same CA and would
otherwise pass. The certificate is good for serving and for dialling (both extended key
usages), which ``LocalCa.issue`` does not make, hence this module.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from yak.security.local_ca import DEFAULT_HOSTS, IssuedCert, LocalCa, write_private

__all__ = ["PEER_CN", "issue_peer_cert", "peer_flags"]

PEER_CN = "yak-etcd-peer"
_DAYS = 825


def _name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue_peer_cert(
    ca: LocalCa, name: str = "etcd-peer", hosts: tuple[str, ...] = DEFAULT_HOSTS
) -> IssuedCert:
    """Write ``<name>.pem``/``<name>-key.pem`` in the CA's folder: CN ``yak-etcd-peer``,
    server and client usage, ``hosts`` as subject alternative names."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, PEER_CN)]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName([_name(h) for h in hosts]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    issued = IssuedCert(ca.folder / f"{name}.pem", ca.folder / f"{name}-key.pem")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_private(issued.key_file, key_pem)
    issued.cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return issued


def peer_flags(cert_file: Path, key_file: Path, ca_file: Path) -> list[str]:
    """etcd's flags for TLS between members with this module's certificate."""
    return [
        f"--peer-cert-file={cert_file}",
        f"--peer-key-file={key_file}",
        f"--peer-trusted-ca-file={ca_file}",
        "--peer-client-cert-auth",
        f"--peer-cert-allowed-cn={PEER_CN}",
    ]
