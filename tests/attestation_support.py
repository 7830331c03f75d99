"""PEP 740 attestations made offline from a test key, with the libraries the real ones come from.

The statement is built by sigstore's ``StatementBuilder`` (what ``Attestation.sign`` uses), signed
as a DSSE envelope (its PAE) with a fresh P-256 key whose self-signed certificate stands where
Fulcio's would; the document is pypi-attestations' ``Attestation`` model. Only the certificate
chain and the transparency-log entry differ from a Sigstore-signed one: those are what online
verification (the index, ``pypi-attestations verify``) checks, and what only CI can produce.
"""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pypi_attestations import Attestation, Envelope, VerificationMaterial
from sigstore.dsse import DigestSet, StatementBuilder, Subject

from jaxrel._util.files import sha256_of
from jaxrel.release.attest import path_for, publish_predicate

KEY = ec.generate_private_key(ec.SECP256R1())


def _certificate() -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jaxrel test key")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(KEY.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(KEY, hashes.SHA256()))
    return certificate.public_bytes(serialization.Encoding.DER)


def attestation_json(name: str, sha256: str, predicate: str | None = None,
                     subjects: list[tuple[str, str]] | None = None) -> str:
    """An attestation document whose statement's subject is ``name`` with ``sha256`` (or ``subjects``)."""
    statement = (StatementBuilder()
                 .subjects([Subject(name=n, digest=DigestSet(root={"sha256": d})) for n, d in subjects or
                            [(name, sha256)]])
                 .predicate_type(predicate or publish_predicate()).build())
    signature = KEY.sign(statement._pae(), ec.ECDSA(hashes.SHA256()))
    attestation = Attestation(
        version=1,
        verification_material=VerificationMaterial(
            certificate=base64.b64encode(_certificate()),
            transparency_entries=[{"logIndex": "0", "note": "test key: never in a transparency log"}]),
        envelope=Envelope(statement=base64.b64encode(statement._contents), signature=base64.b64encode(signature)),
    )
    return attestation.model_dump_json()


def attest_with_test_key(file: Path) -> Path:
    """Write ``<file>.publish.attestation`` for ``file`` as it is now; returns its path."""
    target = path_for(file)
    target.write_text(attestation_json(file.name, sha256_of(file)))
    return target
