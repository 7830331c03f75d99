"""PEP 740 attestations beside a release: ``<file>.publish.attestation``, made with pypi-attestations (Sigstore).

An attestation is a Sigstore-signed in-toto statement whose one *subject* is a distribution's
file name and sha256, with the index's publish predicate. :func:`sign` makes one per verified file
with the job's ambient OIDC identity (Sigstore's public signing service: CI only);
:func:`check` is what ``release verify`` adds, offline: each attestation present parses, names
exactly its file and that file's sha256, and has a file (none orphaned). Checking the signature
and the signer's identity is the index's work at upload (and ``pypi-attestations verify``'s), online.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles
from jaxrel._util.atomic import write_all_atomically
from jaxrel._util.files import sha256_of
from jaxrel.errors import BadInput, EnvironmentFailure, Refused

__all__ = ["INSTALL", "MAX_ATTESTATION", "STATEMENT_TYPE", "SUFFIX", "AttestError", "AttestRefused", "Subject",
           "check", "path_for", "present", "publish_predicate", "read_subject", "sign", "subject_problems"]

SUFFIX = ".publish.attestation"
MAX_ATTESTATION = 1 << 20  # bytes: an attestation is a few kB of JSON (a signed statement and its bundle)
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
INSTALL = "pip install 'jaxrel[release]' (pypi-attestations)"


class AttestError(EnvironmentFailure):
    """Signing could not happen: no ambient OIDC identity, Sigstore unreachable, the library missing (exit 3)."""


class AttestRefused(Refused):
    """The release cannot be attested as it stands (a file fails verification) (exit 1)."""


@dataclass(frozen=True)
class Subject:
    """What one attestation's statement says it is about."""

    name: str
    sha256: str | None
    predicate_type: str


def publish_predicate() -> str:
    """The predicate type of the index's publish attestation (from pypi-attestations, its one definition)."""
    from pypi_attestations import AttestationType

    return str(AttestationType.PYPI_PUBLISH_V1.value)


def path_for(file: Path) -> Path:
    """Where the attestation of ``file`` lives: beside it, ``<file>.publish.attestation``."""
    return file.with_name(file.name + SUFFIX)


def read_subject(path: Path) -> Subject:
    """The single subject of the attestation at ``path``; :class:`ValueError` (one line) when it is not one."""
    try:
        from pydantic import ValidationError
        from pypi_attestations import Attestation
    except ImportError:
        raise ValueError(f"cannot read it: pypi-attestations is not installed; {INSTALL}") from None
    try:
        data = localfiles.read_bytes(path, what="attestation", limit=MAX_ATTESTATION)  # a regular file, bounded
    except BadInput as error:
        raise ValueError(str(error)) from None
    try:
        attestation = Attestation.model_validate_json(data)
        statement: Any = json.loads(attestation.envelope.statement)
    except ValidationError as error:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": str(error)}
        where = ".".join(str(part) for part in first.get("loc", ())) or "the document"
        raise ValueError(f"not a PEP 740 attestation ({where}: {first.get('msg')})") from None
    except (ValueError, RecursionError):
        raise ValueError("its envelope's statement is not JSON") from None
    except OSError as error:
        raise ValueError(f"cannot read it ({error.strerror})") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise ValueError(f"its statement is not an in-toto {STATEMENT_TYPE} statement")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        count = len(subjects) if isinstance(subjects, list) else 0
        raise ValueError(f"its statement has {count} subjects; an attestation names exactly one file")
    name, digests = subjects[0].get("name"), subjects[0].get("digest")
    if not isinstance(name, str):
        raise ValueError("its subject has no name")
    digest = digests.get("sha256") if isinstance(digests, dict) else None
    return Subject(name, digest if isinstance(digest, str) else None, str(statement.get("predicateType")))


def subject_problems(subject: Subject, file: str, sha256: str) -> list[str]:
    """How ``subject`` fails to name exactly ``file`` with ``sha256`` (empty: it does)."""
    problems = []
    if subject.name != file:
        problems.append(f"its subject names {subject.name}, not this file")
    if subject.sha256 != sha256:
        problems.append(f"its subject's sha256 {(subject.sha256 or 'none')[:16]}… differs from the file's "
                        f"{sha256[:16]}…")
    if subject.predicate_type != publish_predicate():
        problems.append(f"its predicate is {subject.predicate_type}, not the publish attestation "
                        f"{publish_predicate()}")
    return problems


def check(directory: Path, digests: Mapping[str, str | None]) -> tuple[dict[str, list[str]], list[str]]:
    """Attestations in ``directory`` against the files ``digests`` lists (name → sha256; ``None``: not hashed).

    Returns each file's problems (one line each, naming the attestation and the fix) and the
    orphans: attestations whose file is not there.
    """
    per_file: dict[str, list[str]] = {}
    orphans: list[str] = []
    for path in sorted(directory.glob("*" + SUFFIX)):
        file = path.name.removesuffix(SUFFIX)
        if file not in digests:
            orphans.append(f"{path.name}: an attestation of {file}, which is not in {directory}; remove it, "
                           "or restore the file it attests")
            continue
        sha256 = digests[file] or sha256_of(directory / file)
        try:
            problems = subject_problems(read_subject(path), file, sha256)
        except ValueError as error:
            problems = [str(error)]
        if problems:
            per_file[file] = [f"attestation {path.name}: {'; '.join(problems)}; remove it and attest again "
                              "(jaxrel release attest), or rebuild"]
    return per_file, orphans


def present(directory: Path, files: Sequence[str]) -> dict[str, Path]:
    """The attestation of each of ``files`` that exists in ``directory``."""
    return {file: path_for(directory / file) for file in files if path_for(directory / file).is_file()}


def sign(directory: Path, files: Sequence[str]) -> list[str]:
    """Attest each of ``files`` lacking an attestation with the ambient OIDC identity; all written or none.

    Returns the attestations written. Needs a CI job with an OIDC identity for Sigstore
    (GitHub Actions: ``permissions: id-token: write``) and Sigstore's public services.
    """
    todo = [file for file in files if not path_for(directory / file).exists()]
    if not todo:
        return []
    try:
        from pypi_attestations import Attestation, AttestationError, Distribution
        from requests import RequestException
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import ClientTrustConfig
        from sigstore.oidc import IdentityError, IdentityToken, detect_credential
        from sigstore.sign import SigningContext
    except ImportError:
        raise AttestError(f"pypi-attestations is not installed; nothing was attested. Fix: {INSTALL}") from None
    try:
        ambient = detect_credential()
    except IdentityError as error:
        raise AttestError(f"cannot get this job's OIDC identity for Sigstore ({' '.join(str(error).split())}); "
                          "nothing was attested. Fix: give the job `permissions: id-token: write`") from None
    if ambient is None:
        raise AttestError("this job has no ambient OIDC identity for Sigstore; nothing was attested. Fix: attest in "
                          "a GitHub Actions job with `permissions: id-token: write` (signing needs one)")
    written: dict[Path, str] = {}
    try:
        trust = ClientTrustConfig.production()
        trust.force_tlog_version = 1  # the index takes attestations logged in Rekor v1
        with SigningContext.from_trust_config(trust).signer(IdentityToken(ambient), cache=True) as signer:
            for file in todo:
                attestation = Attestation.sign(signer, Distribution.from_file(directory / file))
                written[path_for(directory / file)] = attestation.model_dump_json()
    except (AttestationError, SigstoreError, RequestException, OSError) as error:
        raise AttestError(f"signing with Sigstore failed ({' '.join(str(error).split())}); nothing was attested. "
                          "Fix: rerun the job") from None
    write_all_atomically(written)
    return [path.name for path in written]
