"""Reading URLs with a deadline, a size cap and bounded retries: the one place jaxrel talks HTTP(S) to an index.

Built on urllib3 2 (:class:`urllib3.PoolManager`): connections are kept alive and reused within a
run (one TLS handshake per host, not per request); redirects are followed by urllib3, which drops
``Authorization`` when a redirect leaves the origin it was given for (pip's and requests' rule).

Deadlines. urllib3's timeouts bound one socket operation; a server that trickles a byte every few
seconds would never time out. So the request and its headers (name resolution, connect, TLS, the
status line) run in a daemon thread the caller waits on for at most the deadline, and the body is
read with ``read1`` (one socket read per call), the monotonic clock checked between reads: a whole
answer takes at most the deadline plus one stall (the connect timeout).

Retries (pip retries too, with urllib3's ``Retry``): idempotent requests (GET, HEAD) are tried again
on a connection reset or a broken answer and on HTTP 429 and 5xx (500, 502, 503, 504, 520, 527), at most
``Limits.retries`` times, with exponential backoff, honouring ``Retry-After`` up to
:data:`RETRY_AFTER_CAP` seconds, and never past the deadline: when the next try would not fit, the
last answer or error is the result. A refused connection or a timeout is not retried (the index is
down or the deadline is spent), and neither is a POST (an upload or a token exchange decides itself).

Every failure (refused, reset, TLS, a bad status line, broken chunks, too many headers, a stall, a
trickle, too many bytes) is :class:`IndexClientError` (exit 3) naming the URL without credentials. The
server's own reason phrase and body never reach a message (an index can echo the credentials it was sent).
"""

from __future__ import annotations

import http
import http.client
import ssl
import threading
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable
from typing import IO, Any

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import (
    LocationValueError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from jaxrel._util import localfiles
from jaxrel.distributions.netlimits import (
    CHUNK,
    MIB,
    IndexClientError,
    Limits,
    Response,
    TooBig,
    TooSlow,
    Unreachable,
    request_for,
    shown_url,
)
from jaxrel.errors import BadInput, JaxrelError

__all__ = ["CHUNK", "MIB", "RETRY_AFTER_CAP", "IndexClientError", "Limits", "Response", "TooBig", "TooSlow",
           "Unreachable", "fetch", "request_for", "shown_url"]

RETRY_AFTER_CAP = 60  # seconds of a Retry-After header honoured at most
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 520, 527})
IDEMPOTENT = frozenset({"GET", "HEAD"})


def _decoder(encoding: str, url: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise IndexClientError(f"{url}: the answer is compressed as {encoding[:40]!r}, which jaxrel does not read "
                           "(expected no Content-Encoding, gzip or deflate); use another index")


# -- connections -----------------------------------------------------------------------------

_POOLS: dict[tuple[str | None, float], urllib3.PoolManager] = {}
_POOLS_LOCK = threading.Lock()


def _tls_context(cafile: str | None) -> ssl.SSLContext:
    """The default context, trusting ``cafile`` when given: read as a regular file of at most 16 MiB (a FIFO or a
    device named by ``cert`` is refused at once, never waited on)."""
    if not cafile:
        return ssl.create_default_context()
    try:
        data = localfiles.read_bytes(cafile, what="the CA bundle (pip's cert)", limit=16 * MIB)
        return ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (JaxrelError, ssl.SSLError, ValueError) as error:
        why = str(error) if isinstance(error, JaxrelError) else f"{cafile}: not PEM CA certificates ({error})"
        raise BadInput(f"pip's cert option: {why.rstrip('.')}; fix pip's configuration (pip config list)") from None


def _pool(cafile: str | None, connect: float) -> urllib3.PoolManager:
    """One pool manager per CA bundle and connect timeout for the whole run: connections are kept alive."""
    key = (cafile, connect)
    with _POOLS_LOCK:
        manager = _POOLS.get(key)
        if manager is None:
            manager = urllib3.PoolManager(num_pools=32, maxsize=8, block=False, ssl_context=_tls_context(cafile),
                                          timeout=urllib3.Timeout(connect=connect, read=connect))
            _POOLS[key] = manager
        return manager


class _Inner(urllib3.Retry):
    """The Retry urllib3 applies inside one try: redirects (at most 10, ``Authorization`` dropped off-origin) and,
    for an idempotent request, one read error that is not a timeout (a kept-alive connection the server closed
    as it was reused: HTTP clients try that once more). Every other retry is decided by :func:`fetch`, where
    the deadline is known."""

    def increment(self, method: str | None = None, url: str | None = None, response: Any = None,
                  error: Exception | None = None, _pool: Any = None, _stacktrace: Any = None) -> _Inner:
        if isinstance(error, ReadTimeoutError):
            raise error  # a stall is the deadline's business, not a stale connection
        return super().increment(method, url, response, error, _pool, _stacktrace)


_INNER = {idempotent: _Inner(total=None, connect=0, read=1 if idempotent else 0, status=0, other=0, redirect=10,
                             raise_on_redirect=False, raise_on_status=False) for idempotent in (True, False)}


class _Late(Exception):
    """The deadline passed before the answer's headers came."""


def _open(manager: urllib3.PoolManager, method: str, url: str, headers: dict[str, str], body: bytes | None,
          seconds: float) -> urllib3.BaseHTTPResponse:
    """The request sent and its headers read (redirects followed) within ``seconds``: in a daemon thread the
    caller waits on, so a resolver, a handshake or headers that never finish cannot outlast the deadline."""
    box: dict[str, Any] = {}
    lock = threading.Lock()
    done = threading.Event()

    def work() -> None:
        try:
            answer = manager.urlopen(method, url, headers=headers, body=body, retries=_INNER[method in IDEMPOTENT],
                                     redirect=True, preload_content=False, decode_content=False)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread as it is
            answer, box["error"] = None, error
        with lock:
            if box.get("abandoned") and answer is not None:
                answer.close()  # the caller gave up: the connection is not reused
            box["answer"] = answer
            done.set()

    threading.Thread(target=work, name=f"jaxrel-http {method}", daemon=True).start()
    finished = done.wait(max(seconds, 0.0))
    with lock:
        if not finished:
            box["abandoned"] = True
            if box.get("answer") is not None:
                box["answer"].close()
            raise _Late()
    if "error" in box:
        raise box["error"]
    return box["answer"]  # type: ignore[no-any-return]


def _cause(error: BaseException) -> BaseException:
    """The error under urllib3's wrappers (``MaxRetryError(reason=ProtocolError('…', ConnectionResetError()))``)."""
    for _ in range(4):
        if isinstance(error, MaxRetryError) and error.reason is not None:
            error = error.reason
        elif isinstance(error, ProtocolError) and len(error.args) > 1 and isinstance(error.args[1], BaseException):
            error = error.args[1]
        elif isinstance(error, SSLError) and error.args and isinstance(error.args[0], BaseException):
            error = error.args[0]
        elif isinstance(error, NewConnectionError) and error.__cause__ is not None:
            error = error.__cause__  # NewConnectionError is a ConnectTimeoutError to urllib3, whatever the cause
        else:
            break
    return error


def _transient(error: BaseException) -> bool:
    """A reset or an answer cut short: worth another try of an idempotent request."""
    cause = _cause(error)
    return isinstance(cause, (ConnectionResetError, BrokenPipeError, http.client.IncompleteRead,
                              ConnectionAbortedError)) or (isinstance(error, ProtocolError) and cause is error)


def fetch(request: urllib.request.Request, *, limits: Limits, cafile: str | None = None, download: bool = False,
          sink: IO[bytes] | None = None, max_bytes: int | None = None, http_errors: bool = False) -> Response:
    """Send ``request`` (a GET, or a POST when it carries data) and read the answer whole within the deadline and
    the cap (``download`` picks the file limits), trying again as the module says.

    The body is returned, or written to ``sink`` (then ``Response.body`` is empty; a retry after part of
    the body was written starts the sink over when it can seek, and is not made when it cannot). A 404
    is returned as a response with that status, and with ``http_errors`` every HTTP error status, its
    body read within the same limits (for protocols that explain refusals in the body). Any other
    failure raises :class:`IndexClientError`: :class:`TooSlow`, :class:`TooBig`, :class:`Unreachable`.
    """
    url = shown_url(request.full_url)
    deadline = limits.download_deadline if download else limits.deadline
    cap = max_bytes if max_bytes is not None else (limits.max_download if download else limits.max_page)
    knob = "JAXREL_DOWNLOAD_DEADLINE" if download else "JAXREL_NET_DEADLINE"
    started = time.monotonic()
    stall = min(limits.connect, deadline)
    method = request.get_method()
    headers = dict(request.header_items())
    data = request.data if isinstance(request.data, bytes) or request.data is None else bytes(request.data)  # type: ignore[arg-type]
    manager = _pool(cafile, stall)
    policy = urllib3.Retry(total=limits.retries if method in IDEMPOTENT else 0, connect=0, other=0,
                           backoff_factor=0.5, status_forcelist=RETRY_STATUSES, allowed_methods=IDEMPOTENT,
                           raise_on_status=False)

    def left() -> float:
        return deadline - (time.monotonic() - started)

    def late() -> IndexClientError:
        return TooSlow(
            f"{url}: no complete answer within {deadline:g} s (the server stalls, trickles or never answers); "
            f"check the network and the index, or raise {knob}")

    def fits(wait: float) -> bool:
        """Whether another try, ``wait`` seconds from now, still fits before the deadline."""
        return wait + stall / 10 < left()

    while True:
        answer: urllib3.BaseHTTPResponse | None = None
        try:
            answer = _open(manager, method, request.full_url, headers, data, left())
            status = answer.status
            if method in IDEMPOTENT and policy.is_retry(method, status, "Retry-After" in answer.headers):
                try:
                    policy = policy.increment(method, request.full_url, response=answer)
                except MaxRetryError:
                    pass  # tries spent: this answer is the result
                else:
                    asked = policy.get_retry_after(answer)
                    wait = policy.get_backoff_time() if asked is None else min(asked, RETRY_AFTER_CAP)
                    if fits(wait):  # else this answer is the result
                        answer.close()
                        time.sleep(wait)
                        continue
            return _finish(answer, url, status, cap, download, sink, http_errors, left, late)
        except _Late:
            raise late() from None
        except IndexClientError:
            raise
        except (_Retryable, Urllib3Error, http.client.HTTPException, OSError, ValueError) as error:
            if answer is not None:
                answer.close()
            policy, pause = _after_error(error, policy, method, request.full_url, sink)
            if pause is None or not fits(pause):
                failed = error.error if isinstance(error, _Retryable) else error
                raise _failure(failed, url, stall, left, late) from None
            time.sleep(pause)
        except zlib.error as error:
            raise IndexClientError(f"{url}: the compressed answer is corrupt ({error}); retry, or use another index"
                                   ) from None


def _after_error(error: BaseException, policy: urllib3.Retry, method: str, url: str,
                 sink: IO[bytes] | None) -> tuple[urllib3.Retry, float | None]:
    """The policy after a failed try and the seconds to wait before the next, or ``None``: no next try (not
    idempotent, not transient, tries spent, or a sink that cannot start over)."""
    body_started = isinstance(error, _Retryable)
    cause = error.error if isinstance(error, _Retryable) else error
    if method not in IDEMPOTENT or not (body_started or _transient(cause)):
        return policy, None
    try:
        policy = policy.increment(method, url, error=ProtocolError("retry", cause))
    except MaxRetryError:
        return policy, None
    if body_started and sink is not None and not _restart(sink):
        return policy, None
    return policy, policy.get_backoff_time()


class _Retryable(Exception):
    """The body broke off after it began (a reset, a short read): another try may succeed."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _restart(sink: IO[bytes]) -> bool:
    try:
        sink.seek(0)
        sink.truncate()
        return True
    except (OSError, ValueError):
        return False


def _failure(error: BaseException, url: str, stall: float, left: Callable[[], float],
             late: Callable[[], IndexClientError]) -> IndexClientError:
    """One line for a failed try."""
    cause = _cause(error)
    if left() <= 0:
        return late()
    if isinstance(cause, LocationValueError) or isinstance(error, LocationValueError):
        return Unreachable(f"{url}: a redirect to {_scheme_of(cause)}, which jaxrel does not follow; check the "
                           "index (pip config list), or pass --index-url", "a redirect jaxrel does not follow")
    if isinstance(cause, (TimeoutError, Urllib3Timeout)):
        return TooSlow(f"{url}: no answer for {stall:g} s (connecting, or stalled mid-answer); check the network "
                       "and the index, or raise JAXREL_NET_TIMEOUT")
    text = str(cause).strip().splitlines()[0][:160] if str(cause).strip() else type(cause).__name__
    text = f"{type(cause).__name__}: {text}"
    broken = isinstance(cause, http.client.HTTPException) or (isinstance(error, ProtocolError) and cause is error)
    what = "a broken HTTP answer" if broken else "unreachable"
    return Unreachable(f"{url}: {what} ({text}); check the network and the index (pip config list), or pass "
                       "--index-url", text)


def _scheme_of(error: BaseException) -> str:
    text = str(error)
    scheme = next((word.rstrip(",.:;'\")") for word in text.replace("'", " ").split() if "://" in word), None)
    if scheme:
        return scheme.split("://", 1)[0] + "://"
    return (text.split()[-1].strip("'\"") + "://") if text.split() else "another scheme"


def _finish(answer: urllib3.BaseHTTPResponse, url: str, status: int, cap: int, download: bool,
            sink: IO[bytes] | None, http_errors: bool, left: Callable[[], float],
            late: Callable[[], IndexClientError]) -> Response:
    """The answer's status judged and its body read; the connection goes back to the pool when all was read."""
    final = _final_url(answer, url)
    if status >= 400 and not http_errors:
        answer.close()
        if status == 404:
            return Response(final, 404, "", None, b"", answer.headers)
        phrase = _phrase(status)
        raise IndexClientError(f"{url}: the index answered HTTP {status} {phrase}; check the URL and credentials "
                               "(pip config list), or pass --index-url")
    if 300 <= status < 400:
        answer.close()  # redirects past urllib3's limit, or without a Location
        raise IndexClientError(f"{url}: the index answered HTTP {status} {_phrase(status)} (a redirect loop, or "
                               "one that goes nowhere); check the URL, or pass --index-url")
    try:
        body = _read_body(answer, url, cap, download, sink, left, late)
    except (ProtocolError, http.client.HTTPException, ConnectionError) as error:
        answer.close()
        if _transient(error):
            raise _Retryable(_cause(error)) from None
        raise
    except BaseException:
        answer.close()
        raise
    answer.release_conn()
    media, _, params = (answer.headers.get("Content-Type") or "").partition(";")
    charset = next((p.split("=", 1)[1].strip().strip('"').lower() for p in params.split(";")
                    if p.strip().lower().startswith("charset=")), None)
    return Response(final, status, media.strip().lower(), charset, body, answer.headers)


def _phrase(status: int) -> str:
    """The standard phrase of ``status``: never the server's own reason text, which may echo what it was sent."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def _final_url(answer: urllib3.BaseHTTPResponse, url: str) -> str:
    final = answer.url or ""
    return final if "://" in final else url


def _read_body(response: urllib3.BaseHTTPResponse, url: str, cap: int, download: bool, sink: IO[bytes] | None,
               left: Callable[[], float], late: Callable[[], IndexClientError]) -> bytes:
    """The body one socket read at a time, decoded per Content-Encoding, within ``cap`` bytes and the deadline."""
    length = response.headers.get("Content-Length")
    if length and length.strip().isdigit() and int(length) > cap:
        raise _too_big(url, cap, download)
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    decoder = _decoder(encoding, url)
    chunks: list[bytes] = []
    size = 0
    while True:
        if left() <= 0:
            raise late()
        chunk = response.read1(CHUNK, decode_content=False)
        if left() <= 0:
            raise late()
        if not chunk:
            break
        if decoder is not None:
            chunk = decoder.decompress(chunk, cap + 1 - size)
            if decoder.unconsumed_tail:
                raise _too_big(url, cap, download)
        size += len(chunk)
        if size > cap:
            raise _too_big(url, cap, download)
        if sink is not None:
            sink.write(chunk)
        else:
            chunks.append(chunk)
    if decoder is not None and not decoder.eof:
        raise IndexClientError(f"{url}: the {encoding} answer ends early; the index or a proxy cut it off: retry")
    return b"".join(chunks)


def _too_big(url: str, cap: int, download: bool) -> IndexClientError:
    knob = "JAXREL_MAX_DOWNLOAD_MIB" if download else "JAXREL_MAX_PAGE_MIB"
    size = f"{cap // MIB} MiB" if cap >= MIB else f"{cap} bytes"
    return TooBig(f"{url}: the answer is larger than {size}, more than the index lists or sends; "
                  f"check the index, or raise {knob}")
