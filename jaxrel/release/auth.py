"""How ``release publish`` authenticates, and the trusted-publishing exchange (an OIDC identity → an upload token).

Three ways, chosen before anything is uploaded and named in the printed plan (never the secret):

* **token**: ``TWINE_PASSWORD`` (with ``TWINE_USERNAME``, default ``__token__``) in the environment;
* **trusted publishing**: no password in the environment, and the job has an OIDC identity: GitHub
  Actions with ``permissions: id-token: write`` (``ACTIONS_ID_TOKEN_REQUEST_URL`` and
  ``ACTIONS_ID_TOKEN_REQUEST_TOKEN``), or an ambient identity the ``id`` package reads (the library
  twine and sigstore use): GitLab CI (``GITLAB_CI`` and an ``id_tokens`` variable ``<AUDIENCE>_ID_TOKEN``),
  Buildkite (``BUILDKITE`` and ``buildkite-agent``), CircleCI (``CIRCLECI`` and ``circleci``), Google
  Cloud (``GOOGLE_SERVICE_ACCOUNT_NAME``); asked for explicitly with ``--trusted-publishing``, where a
  job without an identity is an environment failure (exit 3);
* **keyring**: neither; twine asks the keyring (username from ``TWINE_USERNAME`` or ``~/.pypirc``),
  and an index that wants credentials it does not get answers 401 (exit 3, as before).

The exchange follows the index's published protocol, each request under a deadline:
``GET {index}/_/oidc/audience`` → ``{"audience": A}``; the OIDC token for audience A (on GitHub
``GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=A`` with ``Authorization: bearer
$ACTIONS_ID_TOKEN_REQUEST_TOKEN`` → ``{"value": OIDC}``, through jaxrel's transport; elsewhere
``id.detect_credential(A)``, within :data:`DEADLINE`, its audience claim checked by ``id``);
``POST {index}/_/oidc/mint-token`` with ``{"token": OIDC}`` → ``{"token": T}``; twine then uploads as
``__token__`` / ``T``. ``{index}`` is the scheme and host of the upload URL, as twine derives it.
twine 7 performs the same exchange itself, but only for the default index's hosts and only over
https; doing it here works for every index (a loopback one in the tests included).
"""

from __future__ import annotations

import http
import json
import shutil
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from jaxrel._util.text import PASSWORD_ENV, excerpt, redact, remember_secret
from jaxrel.distributions import transport
from jaxrel.distributions.urls import WEB, parse_url
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["Auth", "AuthError", "Credentials", "DEADLINE", "MAX_ANSWER", "Method", "OIDC_TOKEN_ENV", "OIDC_URL_ENV",
    "RENEW_AFTER", "SETUP", "TOKEN_USERNAME", "ambient_provider", "audience", "choose", "has_oidc_identity",
    "header_safe", "index_base", "mint", "oidc_token", "upload_url"]

OIDC_URL_ENV = "ACTIONS_ID_TOKEN_REQUEST_URL"
OIDC_TOKEN_ENV = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
TOKEN_USERNAME = "__token__"
DEADLINE = 30.0  # seconds for each request of the exchange, headers and body
MAX_ANSWER = 1 << 20  # bytes: the answers are small JSON objects
RENEW_AFTER = 10 * 60.0  # seconds: minted tokens live 15 minutes; a long upload mints a fresh one
SETUP = "docs/release.md#trusted-publishing"


class AuthError(EnvironmentFailure):
    """Trusted publishing was needed and could not happen (exit 3); the message names the step and the fix."""


class Method(Enum):
    TOKEN = "token"
    TRUSTED_PUBLISHING = "trusted publishing"
    KEYRING = "keyring"


@dataclass(frozen=True)
class Auth:
    """The way an upload authenticates; :meth:`describe` is what the plan prints."""

    method: Method

    def describe(self) -> str:
        if self.method is Method.TOKEN:
            return f"token (TWINE_USERNAME/{PASSWORD_ENV} from the environment)"
        if self.method is Method.TRUSTED_PUBLISHING:
            return "trusted publishing (the job's OIDC identity, exchanged for a short-lived upload token)"
        return f"keyring or ~/.pypirc username (no {PASSWORD_ENV} and no OIDC identity in the environment)"


def upload_url(name: str | None, url: str | None, pypirc: str) -> str | None:
    """Where twine uploads: ``url``, else the ``~/.pypirc`` entry ``name`` as twine reads it (with its defaults)."""
    if url or not name:
        return url
    from twine.exceptions import InvalidConfiguration  # the release extra
    from twine.utils import get_repository_from_config

    with tempfile.NamedTemporaryFile("w", prefix="jaxrel-pypirc-", suffix=".ini") as empty:
        source = pypirc if Path(pypirc).is_file() else empty.name  # a missing ~/.pypirc: twine's defaults alone
        try:
            found = get_repository_from_config(source, name).get("repository")
        except InvalidConfiguration as error:
            reason = " ".join(str(error).replace(source, pypirc).split())
            raise BadInput(f"--repository {name}: {reason}") from None
    return found if isinstance(found, str) else None


def _github(environ: Mapping[str, str]) -> bool:
    return bool(environ.get(OIDC_URL_ENV)) and bool(environ.get(OIDC_TOKEN_ENV))


def ambient_provider(environ: Mapping[str, str]) -> str | None:
    """The CI whose OIDC identity this job has, as far as the environment shows it (``None``: none)."""
    if _github(environ):
        return "GitHub Actions"
    if environ.get("GITLAB_CI") and any(key.endswith("_ID_TOKEN") and value for key, value in environ.items()):
        return "GitLab CI"
    if environ.get("BUILDKITE") and shutil.which("buildkite-agent", path=environ.get("PATH")):
        return "Buildkite"
    if environ.get("CIRCLECI") and shutil.which("circleci", path=environ.get("PATH")):
        return "CircleCI"
    if environ.get("GOOGLE_SERVICE_ACCOUNT_NAME"):
        return "Google Cloud"
    return None


def has_oidc_identity(environ: Mapping[str, str]) -> bool:
    """Whether the job can ask its CI for an OIDC token (see :func:`ambient_provider`)."""
    return ambient_provider(environ) is not None


def choose(environ: Mapping[str, str], *, trusted_publishing: bool = False) -> Auth:
    """The authentication a publish in ``environ`` uses (see the module doc for the order)."""
    if trusted_publishing:
        if not has_oidc_identity(environ):
            missing = " and ".join(name for name in (OIDC_URL_ENV, OIDC_TOKEN_ENV) if not environ.get(name))
            raise AuthError(f"--trusted-publishing: this job has no OIDC identity ({missing} not set); nothing was "
                            "uploaded. Fix: run it in GitHub Actions in a job with `permissions: id-token: write` "
                            "(or GitLab CI with an id_tokens entry, Buildkite, CircleCI, Google Cloud: see "
                            f"{SETUP}), or drop --trusted-publishing and set TWINE_USERNAME/{PASSWORD_ENV}")
        return Auth(Method.TRUSTED_PUBLISHING)
    if environ.get(PASSWORD_ENV):
        return Auth(Method.TOKEN)
    if has_oidc_identity(environ):
        return Auth(Method.TRUSTED_PUBLISHING)
    return Auth(Method.KEYRING)


def index_base(upload_url: str) -> str:
    """``scheme://host[:port]`` of the upload URL (checked by :func:`jaxrel.distributions.urls.parse_url`): where the
    index serves ``/_/oidc/…``; credentials written into the URL are left out."""
    url = parse_url(upload_url, "the upload URL (trusted publishing needs the index's)", WEB)
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}" + (f":{url.port}" if url.port else "")


def _where(url: str) -> str:
    """``url`` without its query (the CI's token URL carries request parameters, never shown)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _json_object(body: bytes, url: str, step: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        # the OIDC-token and mint-token answers carry a token by design: their bodies are described, never shown
        shown = f"it began {excerpt(body, 40)}" if step == "audience" else _kind(data, body)
        raise AuthError(f"trusted publishing ({step}): {_where(url)} did not answer a JSON object ({shown}); "
                        "nothing was uploaded. Fix: check that the index supports trusted publishing")
    return data


def _kind(data: Any, body: bytes) -> str:
    """What an answer was, without any of its text: ``a JSON array``, ``1234 bytes that are not JSON``."""
    if data is None and body.strip() not in (b"null", b""):
        return f"{len(body)} bytes that are not JSON"
    names = {list: "a JSON array", str: "a JSON string", int: "a JSON number", float: "a JSON number",
             bool: "a JSON boolean", type(None): "JSON null"}
    return names.get(type(data), "an empty answer" if not body.strip() else "not a JSON object")


def header_safe(value: str, what: str, fix: str) -> str:
    """``value`` if an HTTP header or an environment variable can carry it (printable ASCII, no space, no line
    break, no NUL), else :class:`AuthError` naming ``what`` and ``fix`` and never showing the value."""
    if not value or len(value) > 64 * 1024 or not all(0x21 <= ord(c) <= 0x7E for c in value):
        raise AuthError(f"trusted publishing: {what} holds characters a request header cannot carry (a line break, "
                        f"a space, a control or non-ASCII character; its value is not shown); nothing was uploaded. "
                        f"Fix: {fix}")
    return value


def _call(request: urllib.request.Request, step: str) -> dict[str, Any]:
    """One request of the exchange through :func:`jaxrel.distributions.transport.fetch`, whole within :data:`DEADLINE`
    and :data:`MAX_ANSWER`; an HTTP error's JSON body is returned with ``_status`` and ``_reason``."""
    url = request.full_url
    limits = transport.Limits(connect=DEADLINE, deadline=DEADLINE, max_page=MAX_ANSWER)
    try:
        answer = transport.fetch(request, limits=limits, http_errors=True)
    except transport.TooSlow:
        raise AuthError(f"trusted publishing ({step}): {_where(url)} did not finish answering within {DEADLINE:g} s; "
                        "nothing was uploaded. Fix: rerun when the service answers") from None
    except transport.TooBig:
        raise AuthError(f"trusted publishing ({step}): {_where(url)} answered more than {MAX_ANSWER} bytes; "
                        "expected a small JSON object; nothing was uploaded. Fix: check the index URL") from None
    except transport.IndexClientError as error:  # no connection, a broken answer, an unknown compression
        reason = error.reason if isinstance(error, transport.Unreachable) else str(error).partition(": ")[2]
        raise AuthError(f"trusted publishing ({step}): cannot reach {_where(url)} ({reason}); nothing was uploaded. "
                        "Fix: check the network and the index URL, then rerun") from None
    if answer.status < 400:
        return _json_object(answer.body, url, step)
    try:
        details = json.loads(answer.body)
    except (ValueError, RecursionError):
        details = None
    try:
        phrase = http.HTTPStatus(answer.status).phrase
    except ValueError:
        phrase = ""
    return {**(details if isinstance(details, dict) else {}), "_status": answer.status, "_reason": phrase}


def _string(answer: dict[str, Any], key: str, url: str, step: str) -> str:
    value = answer.get(key)
    if "_status" in answer:
        raise AuthError(f"trusted publishing ({step}): {_where(url)} answered HTTP {answer['_status']} "
                        f"{answer['_reason']}; nothing was uploaded. Fix: {_fix(step)}")
    if not isinstance(value, str) or not value:
        raise AuthError(f"trusted publishing ({step}): {_where(url)} answered no {key!r} string; nothing was "
                        f"uploaded. Fix: {_fix(step)}")
    return value


def _fix(step: str, provider: str = "GitHub Actions") -> str:
    if step == "OIDC token":
        return {"GitLab CI": "give the job an `id_tokens:` entry named <AUDIENCE>_ID_TOKEN with that audience",
                "Buildkite": "let the pipeline's agent request OIDC tokens (buildkite-agent oidc request-token)",
                "CircleCI": "enable OIDC for the project (circleci run oidc get)",
                "Google Cloud": "grant the service account the Service Account Token Creator role",
                }.get(provider, "give the job `permissions: id-token: write` (and rerun it)")
    return "check that the index supports trusted publishing (its /_/oidc/ endpoints) and the upload URL"


def audience(base: str) -> str:
    """The audience the index wants OIDC tokens for (``GET {base}/_/oidc/audience``)."""
    url = f"{base}/_/oidc/audience"
    return _string(_call(urllib.request.Request(url, headers={"Accept": "application/json"}), "audience"),
                   "audience", url, "audience")


def _ambient_token(provider: str, audience_: str) -> str:
    """The OIDC token ``id`` detects for ``audience_`` (it reads the process environment and runs the CI's own
    agent), within :data:`DEADLINE`; its failures are one :class:`AuthError` that never shows a token."""
    import id as oidc_identity  # the release extra

    box: dict[str, object] = {}

    def detect() -> None:
        try:
            box["token"] = oidc_identity.detect_credential(audience_)
        except Exception as error:  # noqa: BLE001 - IdentityError and whatever a detector raises
            box["error"] = error

    worker = threading.Thread(target=detect, name="jaxrel-oidc", daemon=True)
    worker.start()
    worker.join(DEADLINE)
    if worker.is_alive():
        raise AuthError(f"trusted publishing (OIDC token): {provider} gave no OIDC token within {DEADLINE:g} s; "
                        "nothing was uploaded. Fix: rerun when the CI's token service answers")
    error = box.get("error")
    if error is not None:
        said = excerpt(" ".join(str(error).split()), 160)
        raise AuthError(f"trusted publishing (OIDC token): {provider} did not give an OIDC token for audience "
                        f"{audience_!r} ({type(error).__name__}: {said}); nothing was uploaded. Fix: "
                        f"{_fix('OIDC token', provider)}")
    token = box.get("token")
    if not isinstance(token, str) or not token:
        raise AuthError(f"trusted publishing (OIDC token): {provider} gave no OIDC token; nothing was uploaded. "
                        f"Fix: {_fix('OIDC token', provider)}")
    remember_secret(token)
    return header_safe(token, f"the OIDC token {provider} gave", _fix("OIDC token", provider))


def oidc_token(environ: Mapping[str, str], audience_: str) -> str:
    """The job's OIDC token for ``audience_``: GitHub Actions' token endpoint through jaxrel's transport, another
    CI's through the ``id`` package."""
    provider = ambient_provider(environ)
    if provider is not None and provider != "GitHub Actions":
        return _ambient_token(provider, audience_)
    if not has_oidc_identity(environ):
        raise AuthError(f"trusted publishing: this job has no OIDC identity ({OIDC_URL_ENV}/{OIDC_TOKEN_ENV} "
                        f"not set); nothing was uploaded. Fix: {_fix('OIDC token')}")
    remember_secret(environ[OIDC_TOKEN_ENV])
    request_token = header_safe(environ[OIDC_TOKEN_ENV], OIDC_TOKEN_ENV, "rerun the job: GitHub Actions sets it")
    base = parse_url(environ[OIDC_URL_ENV], OIDC_URL_ENV, WEB, error=AuthError)
    parts = urllib.parse.urlsplit(base.text)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True) + [("audience", audience_)]
    url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
    request = urllib.request.Request(url, headers={"Authorization": f"bearer {request_token}",
                                                   "Accept": "application/json"})
    value = _string(_call(request, "OIDC token"), "value", url, "OIDC token")
    remember_secret(value)
    return header_safe(value, "the OIDC token the CI answered", _fix("OIDC token"))


def mint(base: str, token: str) -> str:
    """An upload token for the OIDC ``token`` (``POST {base}/_/oidc/mint-token``); refusals name the index's reasons."""
    url = f"{base}/_/oidc/mint-token"
    remember_secret(token)
    request = urllib.request.Request(url, data=json.dumps({"token": token}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    answer = _call(request, "mint-token")
    if "_status" in answer:
        errors = answer.get("errors")
        reasons = "; ".join(f"{excerpt(' '.join(str(e.get('code', '?')).split()), 40)[1:-1]}: "
                            f"{excerpt(' '.join(str(e.get('description', '?')).split()), 200)[1:-1]}"
                            for e in errors[:5] if isinstance(e, dict)) if isinstance(errors, list) else ""
        raise AuthError(f"the index refused the trusted-publishing exchange at {_where(url)} (HTTP {answer['_status']}"
                        f"{': ' + ' '.join(reasons.split()) if reasons else ''}); nothing was uploaded. Fix: register "
                        f"this repository, workflow and environment as the project's trusted publisher ({SETUP})")
    minted = _string(answer, "token", url, "mint-token")
    remember_secret(minted)
    return header_safe(minted, "the upload token the index minted", _fix("mint-token"))


@dataclass
class Credentials:
    """What twine gets for each upload: nothing extra, or ``__token__`` and a minted token (renewed when old)."""

    auth: Auth
    upload_url: str | None
    environ: Mapping[str, str]
    _token: str | None = field(default=None, repr=False)
    _minted: float = 0.0

    def env(self) -> dict[str, str]:
        """Variables to add to twine's environment (raises :class:`AuthError` when the exchange fails)."""
        if self.auth.method is not Method.TRUSTED_PUBLISHING:
            return {}
        if self._token is None or time.monotonic() - self._minted > RENEW_AFTER:
            if not self.upload_url:
                raise BadInput("trusted publishing needs the upload URL: pass --repository-url, or a --repository "
                               "that ~/.pypirc (or twine's defaults) names")
            base = index_base(self.upload_url)
            remember_secret(self.environ.get(OIDC_TOKEN_ENV))
            self._token = mint(base, oidc_token(self.environ, audience(base)))
            self._minted = time.monotonic()
        return {"TWINE_USERNAME": TOKEN_USERNAME, PASSWORD_ENV: self._token}

    def scrub(self, text: str) -> str:
        """``text`` with every token of the exchange (and every other secret jaxrel knows of) replaced by ``***``."""
        return redact(text)
