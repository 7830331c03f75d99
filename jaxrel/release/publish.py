"""``jaxrel release publish``: upload a verified release with twine, safely and resumably.

* Everything is verified first (:mod:`jaxrel.release.verify`); one bad file uploads nothing.
* The index is listed before the first upload: a file already there with the same sha256 is
  skipped (a rerun after an interruption finishes the job, no duplicates); one with other
  bytes stops the release before anything is uploaded.
* Order is the manifest's: backend, plugins, extensions, then the frontend, so the index
  never holds a frontend whose backend is missing; a frontend released alone is refused
  unless the index already holds a backend it admits.
* Credentials come only from the environment (``TWINE_USERNAME``/``TWINE_PASSWORD``), the
  keyring, or trusted publishing (:mod:`jaxrel.release.auth`: the job's OIDC identity exchanged
  for a short-lived token): twine gets a copy of ``~/.pypirc`` without passwords, and every line
  of output is scrubbed of the password and of the exchanged tokens before it is shown.
* A file with an attestation beside it (``<file>.publish.attestation``, checked by verify) is
  uploaded with it (``twine upload --attestations``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from jaxrel._util import procs
from jaxrel._util.text import PASSWORD_ENV, redact, table, tail
from jaxrel.distributions.index import Index, IndexClientError, Listing, pip_default_index
from jaxrel.distributions.urls import WEB, parse_url
from jaxrel.distributions.wheels import inspect
from jaxrel.errors import ExitCode, Refused
from jaxrel.family import Family
from jaxrel.release import attest
from jaxrel.release.auth import AuthError, Credentials, Method
from jaxrel.release.config import ReleaseConfig
from jaxrel.release.manifest import Artifact
from jaxrel.release.pypirc import read_pypirc
from jaxrel.release.verify import Verification, verify_dist

__all__ = ["Outcome", "PublishError", "PublishResult", "Repository", "config_without_passwords", "index_hashes",
    "publish", "pypirc_path", "render", "resolve_repository"]


class PublishError(Refused):
    """The release cannot be (fully) published; the message says what was uploaded and the fix."""


@dataclass(frozen=True)
class Repository:
    """Where to upload (a ``~/.pypirc`` name or a URL) and the simple index to list it by."""

    name: str | None
    url: str | None
    index_url: str

    def describe(self) -> str:
        return redact(self.name or self.url or "(no repository named)")


@dataclass
class Outcome:
    """What happened to one artifact."""

    file: str
    distribution: str
    action: str  # "uploaded" | "already on the index" | "would upload" | "not uploaded"
    sha256: str


@dataclass
class PublishResult:
    repository: str
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None
    authentication: str | None = None  # what the upload authenticates with (never the secret)
    # REFUSED: jaxrel refused the release (verification, a clash, a frontend without its backend);
    # ENVIRONMENT: the index or twine failed (credentials rejected or missing, unreachable, not listed)
    failure: ExitCode = ExitCode.REFUSED

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.error is None else self.failure

    def to_json(self) -> dict[str, Any]:
        return {"repository": self.repository, "dry_run": self.dry_run, "ok": self.error is None,
                "authentication": self.authentication,
                "error": self.error, "exit_code": int(self.exit_code), "files": [asdict(o) for o in self.outcomes]}


def pypirc_path() -> Path:
    return Path.home() / ".pypirc"


def resolve_repository(name: str | None, url: str | None, index_url: str | None) -> Repository:
    """The repository to upload to, and the simple index to list it by (``--index-url`` wins).

    A URL's index is ``URL/simple/`` (pypiserver, devpi); a ``~/.pypirc`` entry's is its
    ``repository`` with ``legacy/`` replaced by ``simple/``; ``pypi``'s is pip's default index.
    """
    if index_url is not None:
        index_url = parse_url(index_url, "--index-url").text
    if (name is None) == (url is None):
        raise PublishError("name exactly one of --repository NAME (from ~/.pypirc) or --repository-url URL",
                           exit_code=ExitCode.BAD_INPUT)
    if url is not None:
        url = parse_url(url, "--repository-url", schemes=WEB).text
        return Repository(None, url, index_url or url.rstrip("/") + "/simple/")
    assert name is not None
    upload = read_pypirc(pypirc_path()).repository(name)
    if upload is not None:
        upload = parse_url(upload, f"{pypirc_path()} [{name}] repository", schemes=WEB).text
        derived = re.sub(r"/legacy/?$", "/simple/", upload) if re.search(r"/legacy/?$", upload) else \
            upload.rstrip("/") + "/simple/"
        return Repository(name, None, index_url or derived)
    if name == "pypi":
        return Repository(name, None, index_url or pip_default_index())
    if index_url is None:
        raise PublishError(f"no repository {name!r} in {pypirc_path()}; add it there, or pass --repository-url URL",
                           exit_code=ExitCode.BAD_INPUT)
    return Repository(name, None, index_url)


@contextmanager
def config_without_passwords() -> Iterator[Path]:
    """A copy of ``~/.pypirc`` with every password removed, for twine's ``--config-file``."""
    text = read_pypirc(pypirc_path()).without_passwords()
    handle, name = tempfile.mkstemp(prefix="jaxrel-pypirc-")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        yield Path(name)
    finally:
        os.unlink(name)


def _listing(repository: Repository, distribution: str) -> Listing:
    """``distribution`` on the repository's index, read fresh (a stale cached listing would lie)."""
    with tempfile.TemporaryDirectory(prefix="jaxrel-listing-") as cache:
        try:
            return Index([repository.index_url], cache=Path(cache), refresh=True, timeout=30).listing(distribution)
        except IndexClientError as error:
            raise PublishError(f"cannot list {distribution} on {redact(repository.index_url)} "
                               f"({redact(str(error).rstrip('.'))}); nothing was uploaded. "
                               "Fix: start or reach the index, or pass --index-url",
                               exit_code=ExitCode.ENVIRONMENT) from None


def index_hashes(repository: Repository, artifacts: list[Artifact]) -> dict[str, str | None]:
    """Filename → sha256 of each of the release's files already on the index."""
    return {file.filename: file.sha256 for distribution in dict.fromkeys(a.distribution for a in artifacts)
            for file in _listing(repository, distribution).files}


def _frontend_without_backend(directory: Path, artifacts: list[Artifact], family: Family,
                              repository: Repository) -> str | None:
    """Refuse a frontend whose required backend is neither on the index nor in this release."""
    backend = family.backend.distribution
    ours = [Version(a.version) for a in artifacts if a.role == "backend"]
    for artifact in (a for a in artifacts if a.role == "frontend" and a.kind == "wheel"):
        required = inspect(directory / artifact.file, family, sha256=artifact.sha256).requirements_on(backend)
        if required is None or any(required.contains(v, prereleases=True) for v in ours):
            continue
        if not any(required.contains(v, prereleases=True) for v in _listing(repository, backend).versions()):
            return (f"{artifact.distribution} {artifact.version} requires {backend}{required}, and neither "
                    f"{repository.describe()} nor this release holds one; nothing was uploaded. Fix: publish "
                    f"{backend} first (a frontend must never be on the index without its backend)")
    return None


def _twine_failure(output: str, artifact: Artifact, repository: Repository, done: int, total: int,
                   trusted: bool = False) -> str:
    text = redact(output)
    where = f"{done} of {total} files uploaded"
    rerun = "rerun `jaxrel release publish` to finish (uploaded files are skipped)"
    if trusted and re.search(r"\b40[13]\b|Invalid or non-existent authentication|Forbidden", text):
        return (f"{repository.describe()} rejected the token minted by trusted publishing uploading "
                f"{artifact.file}; {where}. Fix: check the project's trusted publisher on the index "
                "(docs/release.md#trusted-publishing)")
    if re.search(r"\b403\b|Invalid or non-existent authentication|Forbidden", text):
        return (f"{repository.describe()} rejected the credentials (HTTP 403) uploading {artifact.file}; {where}. "
                f"Fix: set TWINE_USERNAME/{PASSWORD_ENV} (or a keyring entry) for this repository")
    if re.search(r"\b401\b|Unauthorized|Credential not found|NonInteractive", text):
        return (f"{repository.describe()} needs credentials (HTTP 401) for {artifact.file}; {where}. "
                f"Fix: set TWINE_USERNAME and {PASSWORD_ENV} in the environment, or store them in the keyring")
    if re.search(r"Connection ?refused|ConnectionError|Max retries|timed out|Name or service", text):
        return f"{repository.describe()} became unreachable uploading {artifact.file}; {where}. Fix: {rerun}"
    lines = [line.strip() for line in text.splitlines()]
    reason = next((line for line in lines if line.startswith(("ERROR", "HTTPError"))), tail(text, 1, empty="?"))
    return f"twine upload of {artifact.file} failed ({reason}); {where}. Fix: {rerun}"


def _upload(path: Path, repository: Repository, config: Path, credentials: Credentials | None = None
            ) -> subprocess.CompletedProcess[str]:
    target = ["--repository", repository.name] if repository.name else ["--repository-url", repository.url or ""]
    attestation = attest.path_for(path)
    attached = ["--attestations", str(attestation)] if attestation.is_file() else []
    command = [sys.executable, "-m", "twine", "--no-color", "upload", "--non-interactive", "--disable-progress-bar",
               "--config-file", str(config), *target, *attached[:1], str(path), *attached[1:]]
    extra = credentials.env() if credentials is not None else {}
    done = procs.run(command, env={**os.environ, **extra, "NO_COLOR": "1"})
    if credentials is not None:
        done.stdout, done.stderr = credentials.scrub(done.stdout), credentials.scrub(done.stderr)
    return done


def publish(
    directory: Path,
    family: Family,
    repository: Repository,
    *,
    dry_run: bool = False,
    progress: Callable[[str], None] = lambda line: None,
    on_uploaded: Callable[[Artifact], None] | None = None,
    credentials: Credentials | None = None,
    release: ReleaseConfig | None = None,
    attest_first: bool = False,
) -> tuple[Verification, PublishResult]:
    """Verify, compare with the index, then upload what is missing in order (see module doc).

    ``credentials`` (:class:`~jaxrel.release.auth.Credentials`) adds what twine authenticates
    with (a trusted-publishing token, exchanged before the first upload); ``None``: the environment's.
    ``attest_first``: attest every verified file lacking an attestation before anything is listed
    or uploaded (:func:`jaxrel.release.attest.sign`; its failure raises, exit 3, nothing uploaded).

    A manifest that cannot be read raises :class:`~jaxrel.release.manifest.ManifestError` (exit 2);
    an index that cannot be listed, :class:`PublishError` with exit 3.
    """
    result = PublishResult(repository.describe(), dry_run,
                           authentication=credentials.auth.describe() if credentials is not None else None)
    verification = verify_dist(directory, family, release=release)
    if not verification.ok:
        first = verification.problems()[0]
        result.error = f"verification failed, nothing uploaded: {first}; fix it and rebuild"
        return verification, result
    artifacts = list(verification.manifest.artifacts)
    if attest_first and not dry_run:
        for name in attest.sign(directory, [a.file for a in artifacts]):
            progress(f"attested: {name}")
    on_index: dict[str, str | None] = {}
    if repository.index_url:  # empty only for a dry run with no repository named
        progress(f"listing {len(artifacts)} files on {redact(repository.index_url)}")
        on_index = index_hashes(repository, artifacts)
    clashes = [a for a in artifacts if a.file in on_index and on_index[a.file] != a.sha256]
    if clashes:
        clash = clashes[0]
        result.error = (f"{clash.file} is already on {repository.describe()} with different bytes (sha256 "
                        f"{(on_index[clash.file] or 'unknown')[:16]}…, ours {clash.sha256[:16]}…); nothing was "
                        "uploaded. Fix: release a new version (jaxrel release bump); a published file never changes")
        result.outcomes = [Outcome(a.file, a.distribution, "not uploaded", a.sha256) for a in artifacts]
        return verification, result
    orphan = _frontend_without_backend(directory, artifacts, family, repository) if repository.index_url else None
    if orphan:
        result.error = orphan
        result.outcomes = [Outcome(a.file, a.distribution, "not uploaded", a.sha256) for a in artifacts]
        return verification, result
    pending = [a for a in artifacts if a.file not in on_index]
    result.outcomes = [Outcome(a.file, a.distribution, "already on the index", a.sha256)
                       for a in artifacts if a.file in on_index]
    if dry_run:
        result.outcomes += [Outcome(a.file, a.distribution, "would upload", a.sha256) for a in pending]
        return verification, result
    with config_without_passwords() as config:
        for number, artifact in enumerate(pending, 1):
            progress(f"[{number}/{len(pending)}] uploading {artifact.file} ({artifact.size / 1024:.1f} KiB)")
            try:
                done = _upload(directory / artifact.file, repository, config, credentials)
            except AuthError as error:
                uploaded = len([o for o in result.outcomes if o.action == "uploaded"])
                result.failure = ExitCode.ENVIRONMENT
                result.error = str(error).replace("nothing was uploaded", f"{uploaded} of {len(pending)} files "
                                                  "uploaded") if uploaded else str(error)
                result.outcomes += [Outcome(a.file, a.distribution, "not uploaded", a.sha256)
                                    for a in pending[number - 1:]]
                return verification, result
            if done.returncode != 0:
                if re.search(r"\b(400|409)\b", done.stdout + done.stderr):
                    again = index_hashes(repository, [artifact]).get(artifact.file)
                    if again == artifact.sha256:  # uploaded by a concurrent or interrupted run
                        result.outcomes.append(Outcome(artifact.file, artifact.distribution,
                                                       "already on the index", artifact.sha256))
                        continue
                result.failure = ExitCode.ENVIRONMENT
                result.error = _twine_failure(done.stdout + done.stderr, artifact, repository,
                                              len([o for o in result.outcomes if o.action == "uploaded"]),
                                              len(pending), trusted=credentials is not None and
                                              credentials.auth.method is Method.TRUSTED_PUBLISHING)
                result.outcomes += [Outcome(a.file, a.distribution, "not uploaded", a.sha256)
                                    for a in pending[number - 1:]]
                return verification, result
            result.outcomes.append(Outcome(artifact.file, artifact.distribution, "uploaded", artifact.sha256))
            if on_uploaded is not None:
                on_uploaded(artifact)
    listed = index_hashes(repository, artifacts)
    missing = [a.file for a in artifacts if listed.get(a.file) != a.sha256]
    if missing:
        result.failure = ExitCode.ENVIRONMENT
        result.error = (f"uploaded, but {repository.describe()} does not list {missing[0]} with its sha256; "
                        "check the index, then rerun `jaxrel release publish`")
    return verification, result


def render(result: PublishResult) -> str:
    title = "publish (dry run)" if result.dry_run else "publish"
    lines = [f"{title} to {result.repository}"]
    if result.authentication:
        lines.append(f"authentication: {result.authentication}")
    if result.outcomes:
        lines.append(table(None, [(o.file, f"{o.action}  sha256 {o.sha256[:16]}…") for o in result.outcomes],
                           indent="  "))
    if result.error:
        lines.append(f"error: {result.error}")
    else:
        uploaded = sum(o.action == "uploaded" for o in result.outcomes)
        lines.append(f"{len(result.outcomes)} files: {uploaded} uploaded, "
                     f"{sum(o.action == 'already on the index' for o in result.outcomes)} already there"
                     + (f", {sum(o.action == 'would upload' for o in result.outcomes)} would be uploaded"
                        if result.dry_run else ""))
    return redact("\n".join(lines))
