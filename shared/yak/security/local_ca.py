"""A local certificate authority for ``yak up --secure`` and tests (``cryptography``).

``LocalCa.create(folder)`` writes ``ca.pem`` (a self-signed CA certificate, 10 years) and
``ca-key.pem``; ``LocalCa.load(folder)`` reads them back, so restarting on the same data folder
keeps the CA that clients already trust. ``issue(name, ...)`` writes ``<name>.pem`` and
``<name>-key.pem`` signed by it: a server certificate (subject alternative names
``127.0.0.1`` and ``localhost`` by default) or a client certificate whose subject common
name is the user (mutual TLS: CN ``alice`` is ``User:alice``). Keys are ECDSA P-256, written
unencrypted with mode 0600 (created so, never readable by others in between).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from yak.security.private_file import write_private

__all__ = ["DEFAULT_HOSTS", "IssuedCert", "LocalCa", "write_private"]

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
_CA_DAYS = 3650
_LEAF_DAYS = 825


@dataclass(frozen=True, slots=True)
class IssuedCert:
    """Where an issued certificate and its key were written."""

    cert_file: Path
    key_file: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, slots=True)
class LocalCa:
    """A CA certificate and key on disk, able to issue leaf certificates."""

    folder: Path
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_file(self) -> Path:
        return self.folder / "ca.pem"

    @classmethod
    def create(cls, folder: Path, name: str = "Yak local CA") -> LocalCa:
        """A new CA in ``folder`` (overwrites one that is there)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        folder.mkdir(parents=True, exist_ok=True)
        write_private(folder / "ca-key.pem", _key_pem(key))
        (folder / "ca.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return cls(folder, certificate, key)

    @classmethod
    def load(cls, folder: Path) -> LocalCa:
        """The CA written by ``create`` in ``folder``."""
        certificate = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
        key = serialization.load_pem_private_key((folder / "ca-key.pem").read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{folder / 'ca-key.pem'} is not an EC private key")
        return cls(folder, certificate, key)

    @classmethod
    def load_or_create(cls, folder: Path) -> LocalCa:
        if (folder / "ca.pem").exists() and (folder / "ca-key.pem").exists():
            return cls.load(folder)
        return cls.create(folder)

    def issue(
        self,
        name: str,
        *,
        common_name: str | None = None,
        hosts: tuple[str, ...] = DEFAULT_HOSTS,
        client: bool = False,
    ) -> IssuedCert:
        """Write ``<name>.pem`` and ``<name>-key.pem``: a server cert for ``hosts``, or with
        ``client`` a client cert whose subject CN is ``common_name`` (default ``name``)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or name)])
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if not client:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
                critical=False,
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        issued = IssuedCert(self.folder / f"{name}.pem", self.folder / f"{name}-key.pem")
        write_private(issued.key_file, _key_pem(key))
        issued.cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return issued


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
