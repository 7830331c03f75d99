"""Reading URLs with a deadline and a size cap: the one place jaxrel talks HTTP(S) to an index.

Every read has a connect timeout (which also bounds any single stall), a total deadline and a
size cap (:class:`Limits`, from ``JAXREL_NET_*`` variables). urllib's ``timeout=`` bounds one
socket operation only, so a server that trickles a byte every few seconds would never time out:
a watchdog thread shuts the connection's sockets down when the total deadline passes, which ends
any blocked read at once, and the read loop checks a monotonic clock between chunks. Every
failure of the transport (refused, reset, TLS, a bad status line, broken chunks, too many
headers, a stall, a trickle, too many bytes) is :class:`IndexClientError` (exit 3) naming the URL.
"""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
import stat
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["CHUNK", "IndexClientError", "Limits", "MIB", "Response", "TooBig", "TooSlow", "Unreachable", "fetch",
    "read_local", "request_for"]

MIB = 1 << 20
CHUNK = 64 * 1024


class IndexClientError(EnvironmentFailure):
    """An index cannot be read, a file cannot be fetched, or a hash does not match (exit 3)."""


class TooSlow(IndexClientError):
    """No complete answer within the deadline, or a stall longer than the connect timeout."""


class TooBig(IndexClientError):
    """An answer larger than the cap."""


class Unreachable(IndexClientError):
    """No connection, or a broken HTTP answer; ``reason`` is the cause in a few words."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """How long and how much one network read may take.

    ``connect``: seconds to connect, and the longest single stall once connected;
    ``deadline``: seconds for a whole index page (redirects included); ``download_deadline``: the
    same for one distribution file; ``max_page`` / ``max_download``: bytes.
    """

    connect: float = 30.0
    deadline: float = 120.0
    download_deadline: float = 1800.0
    max_page: int = 64 * MIB
    max_download: int = 8192 * MIB

    VARIABLES = {  # noqa: RUF012 - a constant table, not a field
        "JAXREL_NET_TIMEOUT": ("connect", float), "JAXREL_NET_DEADLINE": ("deadline", float),
        "JAXREL_DOWNLOAD_DEADLINE": ("download_deadline", float),
        "JAXREL_MAX_PAGE_MIB": ("max_page", int), "JAXREL_MAX_DOWNLOAD_MIB": ("max_download", int),
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, overridden by ``JAXREL_NET_TIMEOUT``, ``JAXREL_NET_DEADLINE``,
        ``JAXREL_DOWNLOAD_DEADLINE`` (seconds), ``JAXREL_MAX_PAGE_MIB``, ``JAXREL_MAX_DOWNLOAD_MIB``."""
        env = os.environ if environ is None else environ
        values: dict[str, float | int] = {}
        for variable, (name, kind) in cls.VARIABLES.items():
            text = env.get(variable, "").strip()
            if not text:
                continue
            try:
                value = kind(text)
                ok = 0 < value < 10**7
            except (ValueError, OverflowError):
                ok = False
            if not ok:
                unit = "seconds" if kind is float else "a whole number of MiB"
                raise BadInput(f"{variable}={text[:40]!r}: expected a positive number ({unit}) below 10000000; "
                               f"unset it or fix it")
            values[name] = value * MIB if kind is int else value
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Response:
    """A complete answer: the final URL (after redirects), status, media type, charset and body."""

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes


class _Watchdog:
    """Shuts down every socket it was given once ``seconds`` pass (wakes any blocked read)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        self._timer.cancel()


def _resolve(host: str, port: int, seconds: float) -> list[Any]:
    """``getaddrinfo`` in a daemon thread, given up after ``seconds``: the resolver has no timeout of its
    own that jaxrel sets, and a stuck DNS server must not outlast the deadline."""
    found: list[Any] = []
    failed: list[OSError] = []

    def work() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            failed.append(error)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"resolving {host} took more than {seconds:g} s")
    if failed:
        raise failed[0]
    return found


def _watched(base: type[http.client.HTTPConnection], watchdog: _Watchdog) -> Callable[..., http.client.HTTPConnection]:
    """``base`` whose host name is resolved within the connect timeout and whose raw sockets are handed to
    ``watchdog`` as soon as they exist (TLS handshakes included)."""

    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        connection = base(*args, **kwargs)

        def create_watched(address: tuple[str, int], timeout: Any = None, source: Any = None) -> socket.socket:
            seconds = float(timeout) if isinstance(timeout, (int, float)) else 30.0
            last: OSError | None = None
            for _, _, _, _, sockaddr in _resolve(address[0], address[1], seconds):
                try:
                    sock = socket.create_connection((sockaddr[0], sockaddr[1]), seconds, source)
                except OSError as error:
                    last = error
                    continue
                watchdog.add(sock)
                return sock
            raise last or OSError(f"{address[0]} has no address")

        connection._create_connection = create_watched  # type: ignore[attr-defined]
        return connection

    return make


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self.watchdog), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self.watchdog = watchdog
        self.tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, self.watchdog), req,
                            context=self.tls)


class _NoFTP(urllib.request.FTPHandler):
    """A redirect to ftp:// is refused (it would run outside the watchdog)."""

    def ftp_open(self, req: urllib.request.Request) -> Any:
        raise urllib.error.URLError("a redirect to ftp://, which jaxrel does not follow")


def request_for(url: str, accept: str | None = None) -> urllib.request.Request:
    """A GET of ``url``; credentials written into it (``https://user:token@host/…``) are sent as Basic
    auth, as pip does, rather than left in the host name where DNS would see them."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": accept} if accept else {}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))
    return urllib.request.Request(url, headers=headers)


def _shown(url: str) -> str:
    """``url`` without credentials or query (a token endpoint's parameters), for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return urllib.parse.urlunsplit(parts._replace(query=""))
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=""))


def _decoder(encoding: str, url: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise IndexClientError(f"{url}: the answer is compressed as {encoding[:40]!r}, which jaxrel does not read "
                           "(expected no Content-Encoding, gzip or deflate); use another index")


def fetch(request: urllib.request.Request, *, limits: Limits, cafile: str | None = None, download: bool = False,
          sink: IO[bytes] | None = None, max_bytes: int | None = None, http_errors: bool = False) -> Response:
    """Send ``request`` (a GET, or a POST when it carries data) and read the answer whole within the deadline and
    the cap (``download`` picks the file limits).

    The body is returned, or written to ``sink`` (then ``Response.body`` is empty). A 404 is
    returned as a response with that status, and with ``http_errors`` every HTTP error status, its
    body read within the same limits (for protocols that explain refusals in the body). Any other
    failure raises :class:`IndexClientError`: :class:`TooSlow`, :class:`TooBig`, :class:`Unreachable`.
    """
    url = _shown(request.full_url)
    deadline = limits.download_deadline if download else limits.deadline
    cap = max_bytes if max_bytes is not None else (limits.max_download if download else limits.max_page)
    knob = "JAXREL_DOWNLOAD_DEADLINE" if download else "JAXREL_NET_DEADLINE"
    started = time.monotonic()
    watchdog = _Watchdog(deadline)

    def late() -> IndexClientError:
        return TooSlow(
            f"{url}: no complete answer within {deadline:g} s (the server stalls, trickles or never answers); "
            f"check the network and the index, or raise {knob}")

    try:
        context = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
    except (OSError, ssl.SSLError) as error:
        watchdog.cancel()
        raise BadInput(f"pip's cert option {cafile}: cannot be read as CA certificates ({error}); fix pip's "
                       "configuration (pip config list)") from None
    opener = urllib.request.build_opener(_HTTP(watchdog), _HTTPS(watchdog, context), _NoFTP())
    try:
        try:
            response = opener.open(request, timeout=min(limits.connect, deadline))
        except urllib.error.HTTPError as error:
            if not http_errors:
                error.close()
                if error.code == 404:
                    return Response(error.geturl() or request.full_url, 404, "", None, b"")
                why = (str(error.reason).strip().splitlines() or [""])[0][:80]
                raise IndexClientError(f"{url}: the index answered HTTP {error.code} {why}; check the URL and "
                                       "credentials (pip config list), or pass --index-url") from None
            response = error  # an answer like any other: its body is read below
        with response:
            body = _read_body(response, url, cap, download, sink, lambda: watchdog.expired or
                              time.monotonic() - started > deadline, late)
            media, _, params = (response.headers.get("Content-Type") or "").partition(";")
            charset = next((p.split("=", 1)[1].strip().strip('"').lower() for p in params.split(";")
                            if p.strip().lower().startswith("charset=")), None)
            status = response.code if isinstance(response, urllib.error.HTTPError) else response.status
            return Response(response.geturl(), status, media.strip().lower(), charset, body)
    except IndexClientError:
        raise
    except zlib.error as error:
        raise IndexClientError(f"{url}: the compressed answer is corrupt ({error}); retry, or use another index"
                               ) from None
    except (http.client.HTTPException, urllib.error.URLError, OSError, ValueError) as error:
        if watchdog.expired:
            raise late() from None
        reason = getattr(error, "reason", None) or error
        if isinstance(reason, TimeoutError):
            raise TooSlow(f"{url}: no answer for {min(limits.connect, deadline):g} s (connecting, or stalled "
                          "mid-answer); check the network and the index, or raise JAXREL_NET_TIMEOUT") from None
        text = str(reason).strip().splitlines()[0][:160] if str(reason).strip() else type(reason).__name__
        if isinstance(reason, BaseException):
            text = f"{type(reason).__name__}: {text}"
        what = "a broken HTTP answer" if isinstance(error, http.client.HTTPException) else "unreachable"
        raise Unreachable(f"{url}: {what} ({text}); check the network and the "
                          "index (pip config list), or pass --index-url", text) from None
    finally:
        watchdog.cancel()


def _read_body(response: http.client.HTTPResponse, url: str, cap: int, download: bool, sink: IO[bytes] | None,
               expired: Callable[[], bool], late: Callable[[], IndexClientError]) -> bytes:
    """The body in chunks, decoded per Content-Encoding, within ``cap`` bytes and until ``expired``."""
    length = response.headers.get("Content-Length")
    if length and length.strip().isdigit() and int(length) > cap:
        raise _too_big(url, cap, download)
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    decoder = _decoder(encoding, url)
    chunks: list[bytes] = []
    size = 0
    while True:
        if expired():
            raise late()
        chunk = response.read(CHUNK)
        if expired():
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


def read_local(path: Path, cap: int, what: str) -> bytes:
    """A regular local file's bytes (at most ``cap``); a FIFO, a device or a directory is refused
    without waiting on it (opened non-blocking, checked with fstat)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise BadInput(f"{path}: {what} cannot be read ({error.strerror}); check the path") from None
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise BadInput(f"{path}: {what} is not a regular file (a FIFO, device or directory); "
                           "point it at a file")
        os.set_blocking(handle, True)
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(cap + 1)
    finally:
        os.close(handle)
    if len(data) > cap:
        raise BadInput(f"{path}: {what} is larger than {cap // MIB} MiB; check the file")
    return data
