"""The local CA of ``yak up --secure``: files, modes, and certificates a TLS stack accepts."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

from cryptography import x509

from yak.security.local_ca import LocalCa


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_ca_and_issued_keys_are_private_files(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path / "tls")
    issued = ca.issue("broker-0")
    assert _mode(tmp_path / "tls" / "ca-key.pem") == 0o600
    assert _mode(issued.key_file) == 0o600
    assert issued.cert_file == tmp_path / "tls" / "broker-0.pem"


def test_a_server_certificate_names_localhost_and_chains_to_the_ca(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path)
    issued = ca.issue("rest-proxy")
    cert = x509.load_pem_x509_certificate(issued.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    cert.verify_directly_issued_by(ca.certificate)
    # Python's TLS stack loads the pair and trusts the CA file.
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(issued.cert_file, issued.key_file)
    client = ssl.create_default_context(cafile=str(ca.cert_file))
    assert client.cert_store_stats()["x509_ca"] == 1


def test_a_client_certificate_carries_the_user_as_common_name(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path)
    issued = ca.issue("alice-client", common_name="alice", client=True)
    cert = x509.load_pem_x509_certificate(issued.cert_file.read_bytes())
    (cn,) = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    assert cn.value == "alice"


def test_load_or_create_keeps_an_existing_ca(tmp_path: Path) -> None:
    first = LocalCa.load_or_create(tmp_path)
    again = LocalCa.load_or_create(tmp_path)
    assert again.certificate == first.certificate
