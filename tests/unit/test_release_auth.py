"""Which authentication ``release publish`` uses, and the trusted-publishing exchange's failures, each one line.

The exchange talks to a stdlib HTTP server on loopback playing the CI's token endpoint and the
index's ``/_/oidc/audience`` and ``/_/oidc/mint-token`` (the happy path, with a real pypiserver
behind it, is tests/e2e/test_trusted_publishing.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jaxrel.release import auth

Route = Callable[[BaseHTTPRequestHandler], None]


def reply(status: int, body: bytes | dict[str, Any]) -> Route:
    data = json.dumps(body).encode() if isinstance(body, dict) else body

    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    return send


def trickle(handler: BaseHTTPRequestHandler) -> None:
    """Headers at once, then one byte every 50 ms, for longer than any test waits."""
    handler.send_response(200)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    for _ in range(400):
        try:
            handler.wfile.write(b" ")
            handler.wfile.flush()
        except OSError:
            return
        time.sleep(0.05)


class Loopback:
    def __init__(self, routes: dict[str, Route]) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                # Read the request body first: closing with it unread makes the kernel reset the
                # connection, and the client may then lose the answer it is still reading.
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.partition("?")[0]
                server.seen.append((self.command, self.path, self.headers.get("Authorization")))
                routes.get(path, reply(404, {"message": "no such route"}))(self)

            do_GET = do_POST = handle_any  # noqa: N815 (http.server's names)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False  # a trickling handler is not waited for
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def environ(self) -> dict[str, str]:
        return {auth.OIDC_URL_ENV: f"{self.url}/ci/token?api-version=2.0", auth.OIDC_TOKEN_ENV: "request-secret"}


@pytest.fixture
def loopback() -> Iterator[Callable[[dict[str, Route]], Loopback]]:
    made: list[Loopback] = []

    def make(routes: dict[str, Route]) -> Loopback:
        made.append(Loopback(routes))
        return made[-1]
    yield make
    for server in made:
        server.httpd.shutdown()
        server.httpd.server_close()


GOOD = {"/_/oidc/audience": reply(200, {"audience": "loopback"}),
        "/ci/token": reply(200, {"value": "oidc-token-value"}),
        "/_/oidc/mint-token": reply(200, {"token": "minted-upload-token"})}


@pytest.mark.parametrize(("environ", "expected"), [
    ({"TWINE_PASSWORD": "pw"}, auth.Method.TOKEN),
    ({"TWINE_PASSWORD": "pw", auth.OIDC_URL_ENV: "u", auth.OIDC_TOKEN_ENV: "t"}, auth.Method.TOKEN),
    ({auth.OIDC_URL_ENV: "u", auth.OIDC_TOKEN_ENV: "t"}, auth.Method.TRUSTED_PUBLISHING),
    ({auth.OIDC_URL_ENV: "u"}, auth.Method.KEYRING),  # no permission for a token: the job has no identity
    ({"TWINE_USERNAME": "someone"}, auth.Method.KEYRING),
])
def test_the_authentication_is_chosen_from_the_environment(environ: dict[str, str], expected: auth.Method) -> None:
    chosen = auth.choose(environ)
    assert chosen.method is expected
    assert "pw" not in chosen.describe()


def test_trusted_publishing_asked_for_without_an_identity_names_what_is_missing() -> None:
    with pytest.raises(auth.AuthError) as raised:
        auth.choose({"TWINE_PASSWORD": "pw", auth.OIDC_URL_ENV: "u"}, trusted_publishing=True)
    assert raised.value.exit_code == 3
    assert str(raised.value).startswith("--trusted-publishing: this job has no OIDC identity "
                                        "(ACTIONS_ID_TOKEN_REQUEST_TOKEN not set); nothing was uploaded. Fix: ")
    both = {auth.OIDC_URL_ENV: "u", auth.OIDC_TOKEN_ENV: "t"}
    assert auth.choose({"TWINE_PASSWORD": "pw", **both}, trusted_publishing=True).method is \
        auth.Method.TRUSTED_PUBLISHING


def test_the_exchange_asks_in_order_and_hands_twine_the_minted_token(loopback: Callable[..., Loopback]) -> None:
    server = loopback(GOOD)
    credentials = auth.Credentials(auth.Auth(auth.Method.TRUSTED_PUBLISHING), f"{server.url}/legacy/",
                                   server.environ())
    assert credentials.env() == {"TWINE_USERNAME": "__token__", "TWINE_PASSWORD": "minted-upload-token"}
    assert server.seen == [("GET", "/_/oidc/audience", None),
                           ("GET", "/ci/token?api-version=2.0&audience=loopback", "bearer request-secret"),
                           ("POST", "/_/oidc/mint-token", None)]
    credentials.env()
    assert len(server.seen) == 3, "a fresh token is reused, not minted per file"
    text = "twine said: minted-upload-token, oidc-token-value, request-secret"
    assert credentials.scrub(text) == "twine said: ***, ***, ***"
    assert auth.Credentials(auth.Auth(auth.Method.TOKEN), None, {}).env() == {}


@pytest.mark.parametrize(("route", "answer", "expected"), [
    ("/_/oidc/audience", reply(404, b"not found"),
     "trusted publishing (audience): {url}/_/oidc/audience answered HTTP 404 Not Found; nothing was uploaded. "
     "Fix: check that the index supports trusted publishing"),
    ("/_/oidc/audience", reply(200, b"<html>"),
     "trusted publishing (audience): {url}/_/oidc/audience did not answer a JSON object (it began '<html>')"),
    ("/_/oidc/audience", reply(200, {"audience": 7}),
     "trusted publishing (audience): {url}/_/oidc/audience answered no 'audience' string"),
    ("/ci/token", reply(403, {"message": "no id-token permission"}),
     "trusted publishing (OIDC token): {url}/ci/token answered HTTP 403 Forbidden; nothing was uploaded. "
     "Fix: give the job `permissions: id-token: write`"),
    ("/_/oidc/mint-token", reply(422, {"errors": [{"code": "invalid-publisher", "description": "no publisher"}]}),
     "the index refused the trusted-publishing exchange at {url}/_/oidc/mint-token (HTTP 422: invalid-publisher: "
     "no publisher); nothing was uploaded. Fix: register this repository, workflow and environment"),
    ("/_/oidc/mint-token", reply(500, b"oops"),
     "the index refused the trusted-publishing exchange at {url}/_/oidc/mint-token (HTTP 500); nothing was"),
    ("/_/oidc/mint-token", reply(200, {"success": True}),
     "trusted publishing (mint-token): {url}/_/oidc/mint-token answered no 'token' string"),
    ("/_/oidc/mint-token", reply(200, b"[" * 100000 + b"]" * 100000),
     "trusted publishing (mint-token): {url}/_/oidc/mint-token did not answer a JSON object"),
    ("/_/oidc/mint-token", reply(200, b" " * (auth.MAX_ANSWER + 1)),
     "trusted publishing (mint-token): {url}/_/oidc/mint-token answered more than 1048576 bytes; expected a small "
     "JSON object; nothing was uploaded. Fix: check the index URL"),
])
def test_each_failed_step_is_one_line_naming_it_and_the_fix(
    loopback: Callable[..., Loopback], route: str, answer: Route, expected: str
) -> None:
    server = loopback({**GOOD, route: answer})
    credentials = auth.Credentials(auth.Auth(auth.Method.TRUSTED_PUBLISHING), f"{server.url}/", server.environ())
    with pytest.raises(auth.AuthError) as raised:
        credentials.env()
    message = str(raised.value)
    assert message.startswith(expected.format(url=server.url)), message
    assert "\n" not in message and "request-secret" not in message and "api-version" not in message
    assert raised.value.exit_code == 3


def test_a_trickling_answer_is_cut_at_the_deadline(
    loopback: Callable[..., Loopback], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "DEADLINE", 0.5)
    server = loopback({**GOOD, "/_/oidc/audience": trickle})
    with pytest.raises(auth.AuthError, match=r"did not finish answering within 0.5 s; nothing was uploaded"):
        auth.audience(server.url)


def test_an_unreachable_index_and_a_bad_upload_url(unused_port: int) -> None:
    with pytest.raises(auth.AuthError, match=r"^trusted publishing \(audience\): cannot reach "
                                             rf"http://127.0.0.1:{unused_port}/_/oidc/audience \("):
        auth.audience(f"http://127.0.0.1:{unused_port}")
    with pytest.raises(auth.BadInput, match=r"^the upload URL .*'file:///srv/index' is not a usable URL "
                                             r"\(the scheme file:// is not supported\); expected an absolute http:// "
                                             r"or https:// URL"):
        auth.index_base("file:///srv/index")
    with pytest.raises(auth.BadInput, match=r"its port is not a number"):
        auth.index_base("https://index.example:99999/legacy/")
    assert auth.index_base("https://user:pw@index.example:8443/legacy/") == "https://index.example:8443"
    assert auth.index_base("http://[::1]:8080/") == "http://[::1]:8080"


@pytest.fixture
def unused_port() -> Iterator[int]:
    """A loopback port held bound for the test and never listened on: a connection to it is refused. A port only
    probed and released could go to any server bound meanwhile (a parallel worker's, this test's own), which then
    answered where nothing should: seen once in a fresh-clone CI run."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


def test_the_transport_returns_error_answers_whole_when_asked_and_never_shows_a_query(
    loopback: Callable[..., Loopback], unused_port: int
) -> None:
    from jaxrel.distributions import transport

    server = loopback({"/refused": reply(422, {"errors": [{"code": "x"}]})})
    limits = transport.Limits(connect=5, deadline=5, max_page=1000)
    request = transport.request_for(f"{server.url}/refused?secret=1")
    answer = transport.fetch(request, limits=limits, http_errors=True)
    assert (answer.status, json.loads(answer.body)) == (422, {"errors": [{"code": "x"}]})
    with pytest.raises(transport.IndexClientError, match=r"answered HTTP 422") as raised:
        transport.fetch(request, limits=limits)
    assert "secret" not in str(raised.value)
    with pytest.raises(transport.Unreachable) as unreachable:
        transport.fetch(transport.request_for(f"http://127.0.0.1:{unused_port}/x?secret=1"), limits=limits)
    assert "secret" not in str(unreachable.value) and "Connection refused" in unreachable.value.reason


REQUEST_TOKEN = "request-token-7f3a9c21"
OIDC = "eyJhbGciOiJSUzI1NiJ9.oidc-claims.signature-51d2"


def echo_request_token(handler: BaseHTTPRequestHandler) -> None:
    """A CI token endpoint that answers, not JSON, the header it got (the request token in it)."""
    reply(500, f"bad request: {handler.headers.get('Authorization')} was refused".encode())(handler)


@pytest.mark.parametrize(("routes", "request_token"), [
    pytest.param({}, "line\r\nX-Injected: 1" + REQUEST_TOKEN, id="request token with CR/LF"),
    pytest.param({"/ci/token": echo_request_token}, REQUEST_TOKEN, id="CI endpoint echoes it, not JSON"),
    pytest.param({"/ci/token": reply(200, json.dumps(["value", REQUEST_TOKEN]).encode())}, REQUEST_TOKEN,
                 id="CI endpoint answers a JSON list holding it"),
    pytest.param({"/ci/token": reply(200, {"value": OIDC}), "/_/oidc/mint-token": reply(
        422, {"errors": [{"code": "invalid-token", "description": f"token {OIDC} is not valid here"}]})},
        REQUEST_TOKEN, id="mint-token echoes the OIDC token in its 422"),
    pytest.param({"/ci/token": reply(200, {"value": OIDC}),
                  "/_/oidc/mint-token": reply(400, f"<html>{OIDC} rejected</html>".encode())},
                 REQUEST_TOKEN, id="mint-token echoes it in a non-JSON body"),
    pytest.param({"/ci/token": reply(200, {"value": OIDC}),
                  "/_/oidc/mint-token": reply(200, {"token": "minted\u0000" + OIDC})},
                 REQUEST_TOKEN, id="a minted token with NUL"),
])
def test_no_token_of_the_exchange_reaches_a_message(
    loopback: Callable[..., Loopback], routes: dict[str, Route], request_token: str
) -> None:
    """Every way a hostile CI endpoint or index could make jaxrel print a token ends in one line (exit 3)
    without it, and the header is never sent with a line break in it."""
    server = loopback({**GOOD, **routes})
    environ = {**server.environ(), auth.OIDC_TOKEN_ENV: request_token}
    credentials = auth.Credentials(auth.Auth(auth.Method.TRUSTED_PUBLISHING), f"{server.url}/", environ)
    with pytest.raises(auth.AuthError) as raised:
        credentials.env()
    message = str(raised.value)
    assert raised.value.exit_code == 3 and "\n" not in message
    for secret in (REQUEST_TOKEN, OIDC, "line\r\n", "X-Injected", OIDC[:20], REQUEST_TOKEN[-12:]):
        assert secret not in message and repr(secret)[1:-1] not in message, (secret, message)
    assert all(authorization is None or "\n" not in authorization for _, _, authorization in server.seen)


def test_the_cli_streams_redact_every_secret_jaxrel_learned(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from jaxrel.cli import main
    from jaxrel.cli import verdict as verdict_verb
    from jaxrel.errors import EnvironmentFailure

    auth.remember_secret(OIDC)
    monkeypatch.setenv("TWINE_PASSWORD", "hunter2-password")

    def leaky(args: argparse.Namespace) -> int:
        print(f"progress {OIDC} hunter2-password https://__token__:pypi-AgEIc@upload.example/legacy/")
        raise EnvironmentFailure(f"server said {json.dumps({'token': OIDC})} and {OIDC!r}")

    monkeypatch.setattr(verdict_verb, "run", leaky)
    assert main(["verdict", "jax==0.12.0", "jaxlib==0.12.0"]) == 3
    out = capsys.readouterr()
    for text in (out.out, out.err):
        assert OIDC not in text and "hunter2-password" not in text and "pypi-AgEIc" not in text, text
    assert "https://__token__:***@upload.example" in out.out and out.err.count("\n") == 1
