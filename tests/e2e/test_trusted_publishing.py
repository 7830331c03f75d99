"""Trusted publishing and attestations, end to end, against a real pypiserver behind a loopback index front.

The front (``OidcFront``, a stdlib HTTP server on 127.0.0.1) plays what a CI job and an index
that supports trusted publishing serve, by the published protocol: the CI's token endpoint
(``GET /ci/token?api-version=2.0&audience=A`` with ``Authorization: bearer …``, as GitHub
Actions' ``ACTIONS_ID_TOKEN_REQUEST_URL`` / ``…_TOKEN``), the index's ``GET /_/oidc/audience`` and
``POST /_/oidc/mint-token``; every other request (uploads, the simple index) goes through to the
real pypiserver, whose only user is ``__token__`` and whose password is the token the front
mints. So an upload succeeds only with the exchanged token. The front records each upload's
form fields, which shows the attestations twine sends.

Sigstore itself (signing with a Fulcio certificate, logging in Rekor, the index verifying) needs
its public services and a CI identity: the attestations here are signed offline with a test key.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import secrets
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from attestation_support import attest_with_test_key
from splitfam_support import PypiServer

from jaxrel.release import attest, manifest

pytestmark = pytest.mark.integration
AUDIENCE = "jaxrel-loopback-index"


class OidcFront:
    """The CI's OIDC token endpoint and the index's exchange endpoints, in front of a pypiserver."""

    def __init__(self, server: PypiServer, *, publisher_registered: bool = True, mints: str | None = None,
                 echo: bool = False) -> None:
        self.server = server
        self.echo = echo  # the mint endpoint refuses, quoting the token it was sent
        self.publisher_registered = publisher_registered
        self.mints = mints or server.password  # the token minted; anything else, and pypiserver refuses uploads
        self.ci_secret = "ci-request-" + secrets.token_urlsafe(12)
        self.issued: list[str] = []  # OIDC tokens the "CI" handed out
        self.calls: list[tuple[str, str]] = []
        self.uploads: list[dict[str, str]] = []  # form fields of each upload (file content left out)
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path, _, query = self.path.partition("?")
                front.calls.append(("GET", path))
                if path == "/_/oidc/audience":
                    return self.answer(200, {"audience": AUDIENCE})
                if path == "/ci/token":
                    asked = urllib.parse.parse_qs(query)
                    if self.headers.get("Authorization") != f"bearer {front.ci_secret}":
                        return self.answer(401, {"message": "bad request token"})
                    if asked.get("audience") != [AUDIENCE] or asked.get("api-version") != ["2.0"]:
                        return self.answer(400, {"message": f"unexpected query {query}"})
                    front.issued.append("oidc-" + secrets.token_urlsafe(16))
                    return self.answer(200, {"count": 1, "value": front.issued[-1]})
                return self.forward(None)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                front.calls.append(("POST", self.path))
                if self.path == "/_/oidc/mint-token":
                    token = json.loads(body).get("token")
                    if front.echo:
                        return self.answer(422, {"message": f"you sent {token}", "errors": [
                            {"code": "invalid-token", "description": f"token {token} is not trusted"}]})
                    if not front.publisher_registered:
                        return self.answer(422, {"message": "Token request failed", "errors": [
                            {"code": "invalid-publisher", "description": "valid token, but no corresponding\n"
                                                                         "publisher (Publisher with matching claims "
                                                                         "was not found)"}]})
                    if token not in front.issued:
                        return self.answer(422, {"errors": [{"code": "invalid-token", "description": "unknown"}]})
                    return self.answer(200, {"success": True, "token": front.mints, "expires": 0})
                front.uploads.append(front.form_fields(self.headers.get("Content-Type", ""), body))
                return self.forward(body)

            def forward(self, body: bytes | None) -> None:
                request = urllib.request.Request(front.server.url.rstrip("/") + self.path, data=body,
                                                 method=self.command,
                                                 headers={k: v for k, v in self.headers.items()
                                                          if k.lower() not in ("host", "connection")})
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                try:
                    with opener.open(request, timeout=60) as response:
                        status, headers, data = response.status, response.headers, response.read()
                except urllib.error.HTTPError as error:
                    status, headers, data = error.code, error.headers, error.read()
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def form_fields(content_type: str, body: bytes) -> dict[str, str]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if isinstance(name, str) and name != "content":
                fields[name] = part.get_content() if part.get_content_maintype() == "text" else ""
        return fields

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/"

    def job_env(self, identity: bool = True) -> dict[str, str]:
        """The environment of a CI job with (or without) an OIDC identity, and no upload password."""
        env = {k: v for k, v in self.server.twine_env().items() if k not in ("TWINE_USERNAME", "TWINE_PASSWORD")}
        if identity:
            env["ACTIONS_ID_TOKEN_REQUEST_URL"] = f"{self.url}ci/token?api-version=2.0"
            env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = self.ci_secret
        else:
            env.pop("ACTIONS_ID_TOKEN_REQUEST_URL", None)
            env.pop("ACTIONS_ID_TOKEN_REQUEST_TOKEN", None)
        return env

    def secrets(self) -> list[str]:
        return [self.ci_secret, self.server.password, self.mints, *self.issued]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()




@pytest.fixture
def token_server(pypiserver_factory: Any) -> PypiServer:
    """A pypiserver whose one uploader is ``__token__``, with the password the front mints."""
    server: PypiServer = pypiserver_factory(username="__token__")
    return server


@pytest.fixture
def front(token_server: PypiServer) -> Iterator[OidcFront]:
    made = OidcFront(token_server)
    yield made
    made.stop()


def publish(repo: Path, dist: Path, front: OidcFront, *options: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "publish", str(dist), "--repository-url",
                           front.url, *options], cwd=repo, capture_output=True, text=True,
                          env=env or front.job_env(), timeout=600)
    for secret in front.secrets():
        assert secret not in done.stdout + done.stderr, "a secret of the exchange leaked into the output"
    return done


def assert_published_exactly(server: PypiServer, dist: Path) -> None:
    artifacts = manifest.read(dist).artifacts
    assert server.files() == sorted(a.file for a in artifacts)


def test_no_password_and_an_oidc_identity_publishes_with_the_exchanged_token(
    built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer
) -> None:
    dry = publish(built[0], dist, front, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "authentication: trusted publishing (the job's OIDC identity" in dry.stdout
    assert ("POST", "/_/oidc/mint-token") not in front.calls, "a dry run exchanges nothing"
    done = publish(built[0], dist, front, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["authentication"].startswith("trusted publishing")
    assert [f["action"] for f in result["files"]] == ["uploaded"] * 5
    assert_published_exactly(token_server, dist)
    exchange = [call for call in front.calls if call[1] in ("/_/oidc/audience", "/ci/token", "/_/oidc/mint-token")]
    assert exchange == [("GET", "/_/oidc/audience"), ("GET", "/ci/token"), ("POST", "/_/oidc/mint-token")]
    assert len(front.uploads) == 5 and all("attestations" not in fields for fields in front.uploads)
    again = publish(built[0], dist, front)  # resumable as before: nothing left to upload, nothing exchanged
    assert again.returncode == 0 and "0 uploaded, 5 already there" in again.stdout
    assert len(front.issued) == 1


def test_trusted_publishing_asked_for_without_an_oidc_identity_exits_3_in_one_line(
    built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer
) -> None:
    done = publish(built[0], dist, front, "--trusted-publishing", env=front.job_env(identity=False))
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("jaxrel release publish: error: --trusted-publishing: this job has no OIDC identity "
                               "(ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN not set); "
                               "nothing was uploaded. Fix: "), lines[0]
    assert token_server.files() == [] and front.calls == []
    plain = publish(built[0], dist, front, env=front.job_env(identity=False))  # no identity, no password: as today
    assert plain.returncode == 3 and "needs credentials (HTTP 401)" in plain.stderr
    assert "authentication: keyring or ~/.pypirc username" in plain.stdout
    assert token_server.files() == []
    asked = len(front.calls)
    unsigned = publish(built[0], dist, front, "--attest")  # an identity for the index, none for Sigstore here
    assert unsigned.returncode == 3
    assert unsigned.stderr.strip().splitlines() == [
        "jaxrel release publish: error: this job has no ambient OIDC identity for Sigstore; nothing was attested. "
        "Fix: attest in a GitHub Actions job with `permissions: id-token: write` (signing needs one)"]
    assert not list(dist.glob("*.publish.attestation")) and token_server.files() == []
    assert len(front.calls) == asked, "signing comes first: nothing listed, exchanged or uploaded"


def test_an_index_without_the_publisher_or_rejecting_its_token_gets_nothing(
    built: tuple[Path, Path], dist: Path, token_server: PypiServer
) -> None:
    front = OidcFront(token_server, publisher_registered=False)
    try:
        done = publish(built[0], dist, front)
    finally:
        front.stop()
    assert done.returncode == 3
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    assert ("the index refused the trusted-publishing exchange at " f"{front.url}_/oidc/mint-token (HTTP 422: "
            "invalid-publisher: valid token, but no corresponding publisher (Publisher with matching claims was "
            "not found)); nothing was uploaded. Fix: register") in errors[0]
    assert token_server.files() == []
    front = OidcFront(token_server, mints="minted-but-not-the-password")
    try:
        rejected = publish(built[0], dist, front)
    finally:
        front.stop()
    assert rejected.returncode == 3
    assert "rejected the token minted by trusted publishing uploading splitfam_core-0.1.0-" in rejected.stderr
    assert "0 of 5 files uploaded" in rejected.stderr and token_server.files() == []


def _jwt(audience: str) -> str:
    """A token shaped as a CI's OIDC token (header.claims.signature) for ``audience``; ``id`` checks its audience."""
    import base64

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'aud': audience, 'jti': secrets.token_hex(8)})}.sig{secrets.token_hex(8)}"


def _ci_job(provider: str, front: OidcFront, tmp_path: Path) -> dict[str, str]:
    """The environment of a GitLab CI or Buildkite job whose OIDC identity the front will accept. Buildkite's agent
    cannot run here: a ``buildkite-agent`` on PATH answers ``oidc request-token`` as the real one does (and
    records its arguments); GitLab's identity is the ``id_tokens`` variable itself."""
    token = _jwt(AUDIENCE)
    front.issued.append(token)
    env = front.job_env(identity=False)
    if provider == "gitlab":
        env.update(GITLAB_CI="true", JAXREL_LOOPBACK_INDEX_ID_TOKEN=token)
    else:
        agent = tmp_path / "bin" / "buildkite-agent"
        agent.parent.mkdir(exist_ok=True)
        agent.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'agent-args'}\n"
                         f"[ \"$1 $2 $3 $4\" = \"oidc request-token --audience {AUDIENCE}\" ] || exit 1\n"
                         f"echo {token}\n")
        agent.chmod(0o755)
        env.update(BUILDKITE="true", PATH=f"{agent.parent}:{env.get('PATH', '')}")
    return env


@pytest.mark.parametrize("provider", ["gitlab", "buildkite"])
def test_other_ci_identities_publish_through_the_id_package(
    provider: str, built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer, tmp_path: Path
) -> None:
    env = _ci_job(provider, front, tmp_path)
    done = publish(built[0], dist, front, "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [f["action"] for f in json.loads(done.stdout)["files"]] == ["uploaded"] * 5
    assert_published_exactly(token_server, dist)
    exchange = [call for call in front.calls if call[1] in ("/_/oidc/audience", "/ci/token", "/_/oidc/mint-token")]
    assert exchange == [("GET", "/_/oidc/audience"), ("POST", "/_/oidc/mint-token")]  # no GitHub endpoint asked
    if provider == "buildkite":
        assert (tmp_path / "agent-args").read_text().split() == ["oidc", "request-token", "--audience", AUDIENCE]


@pytest.mark.parametrize("provider", ["gitlab", "buildkite"])
def test_an_exchange_that_echoes_another_cis_token_gets_none_printed(
    provider: str, built: tuple[Path, Path], dist: Path, token_server: PypiServer, tmp_path: Path
) -> None:
    front = OidcFront(token_server, echo=True)
    try:
        env = _ci_job(provider, front, tmp_path)
        done = publish(built[0], dist, front, env=env)  # publish() asserts no token of the exchange is printed
    finally:
        front.stop()
    assert done.returncode == 3
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "the index refused the trusted-publishing exchange" in errors[0], done.stderr
    assert token_server.files() == []


def test_a_gitlab_job_without_its_id_token_is_told_which_variable(
    built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer
) -> None:
    env = {**front.job_env(identity=False), "GITLAB_CI": "true", "OTHER_ID_TOKEN": _jwt("another-audience")}
    done = publish(built[0], dist, front, "--trusted-publishing", env=env)
    assert done.returncode == 3
    line = done.stderr.strip().splitlines()[-1]
    assert "GitLab CI did not give an OIDC token" in line and "JAXREL_LOOPBACK_INDEX_ID_TOKEN" in line, line
    assert "id_tokens" in line and token_server.files() == []


def test_attestations_are_checked_then_uploaded_beside_their_files(
    built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer
) -> None:
    artifacts = manifest.read(dist).artifacts
    for artifact in artifacts:
        attest_with_test_key(dist / artifact.file)
    verified = subprocess.run([sys.executable, "-m", "jaxrel", "release", "verify", str(dist)], cwd=built[0],
                              capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.count("twine check --strict, attestation)") == 5
    done = publish(built[0], dist, front, "--attest")  # every file attested already: nothing to sign
    assert done.returncode == 0, done.stdout + done.stderr
    assert_published_exactly(token_server, dist)
    sent = [json.loads(fields["attestations"]) for fields in front.uploads]
    expected = [[json.loads(attest.path_for(dist / a.file).read_text())] for a in artifacts]
    assert sent == expected, "each upload carries its own file's attestation"


def test_a_swapped_attestation_stops_the_publish_before_any_upload(
    built: tuple[Path, Path], dist: Path, front: OidcFront, token_server: PypiServer
) -> None:
    first, second = manifest.read(dist).artifacts[:2]
    attest_with_test_key(dist / first.file)
    shutil.copyfile(attest.path_for(dist / first.file), attest.path_for(dist / second.file))
    done = publish(built[0], dist, front)
    assert done.returncode == 1
    swapped = f"attestation {second.file}.publish.attestation: its subject names {first.file}, not this file"
    assert swapped in done.stdout
    assert token_server.files() == [] and ("POST", "/_/oidc/mint-token") not in front.calls
