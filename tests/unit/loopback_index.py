"""A misbehaving package index on a loopback port, for the network boundary tests.

Each request's first path segment picks a behaviour (``/trickle/simple/jax/`` …); ``/page/<key>/…``
serves a registered (content type, body) pair, so a test can hand any bytes to the client. Written
on raw sockets: http.server cannot send a bad status line or broken chunks.
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

Behaviour = Callable[[socket.socket, str], None]
BOMB = gzip.compress(b"\0" * (100 << 20), compresslevel=1)  # 100 MiB of zeros in about 100 KiB
HTML = b'<!DOCTYPE html><html><body><a href="/files/jax-0.1.0.tar.gz#sha256=' + b"0" * 64 + b'">x</a></body></html>'


@dataclass
class LoopbackIndex:
    """The server; ``url(mode)`` is an index URL whose pages behave as ``mode`` says."""

    pages: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stop = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/simple/"

    def serve_page(self, key: str, content_type: str, body: bytes) -> str:
        """Register a page; the index URL serving it for every project."""
        self.pages[key] = (content_type, body)
        return self.url(f"page/{key}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                data = conn.recv(4096)
                if not data:
                    return
                request += data
            path = request.split(b" ", 2)[1].decode("latin-1")
            self.requests.append(path)
            mode = path.strip("/").split("/")[0]
            if mode == "page":
                segments = path.strip("/").split("/")
                kind, body = self.pages[segments[1]]
                self._send(conn, kind, body.replace(b"@P@", segments[-1].encode()))  # @P@: the project asked for
            else:
                getattr(self, "_" + mode.replace("-", "_"))(conn, path)
        except Exception:  # noqa: BLE001 - a behaviour's end (the client hung up) is not the test's business
            pass
        finally:
            conn.close()

    def _sleep(self, seconds: float) -> bool:
        """Wait; False once the server is stopping."""
        return not self.stop.wait(seconds)

    @staticmethod
    def _send(conn: socket.socket, kind: str, body: bytes, extra: str = "") -> None:
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n{extra}"
                "Connection: close\r\n\r\n")
        conn.sendall(head.encode() + body)

    # -- behaviours -------------------------------------------------------------------------

    def _ok(self, conn: socket.socket, path: str) -> None:
        self._send(conn, "text/html", HTML)

    def _trickle(self, conn: socket.socket, path: str) -> None:
        """Headers, then one byte of body at a time, forever (each byte within any per-read timeout)."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")
        while self._sleep(0.1):
            conn.sendall(b"<")

    def _trickle_headers(self, conn: socket.socket, path: str) -> None:
        """The status line and then headers one byte at a time, forever."""
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        while self._sleep(0.1):
            conn.sendall(b"X")

    def _stall(self, conn: socket.socket, path: str) -> None:
        """Headers, then nothing."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n<html>")
        while self._sleep(0.1):
            pass

    def _silent(self, conn: socket.socket, path: str) -> None:
        """Accepts, never answers."""
        while self._sleep(0.1):
            pass

    def _huge(self, conn: socket.socket, path: str) -> None:
        """A body without a length that never ends, as fast as it can be read."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>")
        block = b"<a>x</a>" * 8192
        while not self.stop.is_set():
            conn.sendall(block)

    def _huge_length(self, conn: socket.socket, path: str) -> None:
        """A Content-Length of 50 GB."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 50000000000\r\n\r\n<html>")

    def _bad_status(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 OK-ish\r\n\r\n")

    def _not_http(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    def _broken_chunks(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\n<html\r\nzz\r\nnot a chunk\r\n")

    def _many_headers(self, conn: socket.socket, path: str) -> None:
        headers = "".join(f"X-Header-{i}: {i}\r\n" for i in range(500))
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n{headers}Content-Length: 0\r\n\r\n".encode())

    def _long_header(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 200_000 + b"\r\n\r\n")

    def _gzip_unlabelled(self, conn: socket.socket, path: str) -> None:
        self._send(conn, "text/html", gzip.compress(HTML))

    def _gzip_json_unlabelled(self, conn: socket.socket, path: str) -> None:
        self._send(conn, "application/vnd.pypi.simple.v1+json", gzip.compress(b'{"meta": {}, "files": []}'))

    def _gzip_bomb(self, conn: socket.socket, path: str) -> None:
        """A labelled gzip body that inflates past any page cap (100 MiB of zeros, 100 KiB on the wire)."""
        self._send(conn, "text/html", BOMB, "Content-Encoding: gzip\r\n")

    def _error_500(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")

    def _redirect_loop(self, conn: socket.socket, path: str) -> None:
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {path}\r\nContent-Length: 0\r\n\r\n".encode())

    def _redirect_ftp(self, conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: ftp://127.0.0.1:9/x\r\nContent-Length: 0\r\n\r\n")
