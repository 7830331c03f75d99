"""Package indexes on a loopback port that behave as real ones do, and as broken ones do.

One :class:`SimpleIndexServer` serves several named indexes (``http://127.0.0.1:PORT/<name>/simple/``),
each with its own projects and behaviours (:class:`Behaviour`): PEP 503 HTML only or PEP 691 JSON
(with or without PEP 700 sizes), PEP 658/714 metadata with a right or a wrong digest, files whose
server ignores ``Range``, answers that fail with 503 a few times or reset the connection once before
succeeding, a ``Retry-After`` header. Every request is logged (index, path, headers) and every
connection counted, so a test can compare which sources pip, uv and jaxrel asked, and how.
``flat(name)`` serves a find-links page (every file of the index's projects, one flat list).
Written on :mod:`http.server` (HTTP/1.1, keep-alive); 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

JSON = "application/vnd.pypi.simple.v1+json"


@dataclass
class Behaviour:
    """How one index answers."""

    json: bool = True  # PEP 691 JSON when asked for it; else PEP 503 HTML only
    sizes: bool = True  # PEP 700 "size" in JSON
    upload_times: bool = False  # PEP 700 "upload-time" in JSON: each file's modification time
    pep658: bool = False  # serve <file>.metadata and announce it (JSON core-metadata, HTML data-core-metadata)
    wrong_digest: bool = False  # ... announced with a digest that is not the file's
    ranges: bool = True  # honour Range on files (else 200 with the whole body)
    fail_503: int = 0  # answer 503 this many times per path before answering
    retry_after: str | None = None  # the Retry-After header sent with those 503s
    reset_once: bool = False  # reset the connection on the first request of each path
    echo: bool = False  # answer 401 with the request's headers in the body (an index that echoes secrets)
    delay: float = 0.0  # seconds each file request waits before its answer (a slow, trickling server)
    redirect_to: str | None = None  # answer every file request with a 302 to <redirect_to>/files/<file name>


@dataclass
class Index:
    behaviour: Behaviour
    projects: dict[str, list[Path]] = field(default_factory=dict)


@dataclass
class Request:
    index: str
    path: str
    headers: dict[str, str]
    method: str = "GET"


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up (as jaxrel does on a refused answer) is not the server's business


class SimpleIndexServer:
    """The server; use as a context manager."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.scheme = "https" if tls else "http"
        self.indexes: dict[str, Index] = {}
        self.requests: list[Request] = []
        self.connections = 0
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server._answer(self)

            def do_HEAD(self) -> None:
                server._answer(self, head=True)

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SimpleIndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def origin(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def add(self, name: str, behaviour: Behaviour | None = None, **projects: list[Path]) -> str:
        """Add an index (project name → wheels; ``_`` in a keyword becomes ``-``); its URL."""
        self.indexes[name] = Index(behaviour or Behaviour(),
                                   {key.replace("_", "-"): list(files) for key, files in projects.items()})
        return self.url(name)

    def url(self, name: str) -> str:
        return f"{self.origin}/{name}/simple/"

    def flat(self, name: str) -> str:
        return f"{self.origin}/{name}/flat/"

    def asked(self, kind: str = "simple") -> set[str]:
        """The indexes whose ``kind`` pages (``simple`` or ``flat``) were requested."""
        return {r.index for r in self.requests if r.path.split("/")[2:3] == [kind]}

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self._seen.clear()

    # -- answering --------------------------------------------------------------------------

    def _answer(self, handler: BaseHTTPRequestHandler, head: bool = False) -> None:
        path = urllib.parse.unquote(handler.path.split("?", 1)[0])
        parts = path.strip("/").split("/")
        index = self.indexes.get(parts[0]) if parts else None
        with self._lock:
            self.requests.append(Request(parts[0] if parts else "", path, dict(handler.headers.items()),
                                         handler.command))
            key = (parts[0] if parts else "", path)
            seen = self._seen[key] = self._seen.get(key, 0) + 1
        if index is None or len(parts) < 2:
            return _send(handler, 404, "text/plain", b"no such index", head)
        behaviour = index.behaviour
        if behaviour.reset_once and seen == 1:
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
            handler.close_connection = True
            return None
        if seen <= behaviour.fail_503:
            extra = {"Retry-After": behaviour.retry_after} if behaviour.retry_after else {}
            return _send(handler, 503, "text/plain", b"busy", head, extra)
        if behaviour.echo:  # the credentials, decoded too, in the reason phrase and the body
            sent = handler.headers.get("Authorization", "")
            decoded = base64.b64decode(sent.split()[-1]).decode("utf-8", "replace") if sent.startswith("Basic ") else ""
            said = "\n".join(f"{k}: {v}" for k, v in handler.headers.items()).encode()
            handler.send_response(401, f"you sent {sent} ({decoded})")
            handler.send_header("Content-Type", "text/plain")
            body = b"unauthorized; you sent:\n" + said + f"\ndecoded: {decoded}\n".encode()
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            if not head:
                handler.wfile.write(body)
            return None
        kind = parts[1]
        if kind == "simple" and len(parts) == 3:
            return self._project_page(handler, parts[0], index, parts[2], head)
        if kind == "flat":
            files = [wheel for wheels in index.projects.values() for wheel in wheels]
            links = "".join(f'<a href="../files/{w.name}#sha256={_sha(w)}">{w.name}</a>\n' for w in files)
            return _send(handler, 200, "text/html", f"<html><body>{links}</body></html>".encode(), head)
        if kind == "files" and len(parts) == 3:
            time.sleep(behaviour.delay)
            if behaviour.redirect_to:
                handler.send_response(302)
                handler.send_header("Location", f"{behaviour.redirect_to.rstrip('/')}/files/{parts[2]}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return None
            return self._file(handler, index, parts[2], head)
        return _send(handler, 404, "text/plain", b"not found", head)

    def _project_page(self, handler: BaseHTTPRequestHandler, name: str, index: Index, project: str,
                      head: bool) -> None:
        wheels = index.projects.get(project)
        if wheels is None:
            return _send(handler, 404, "text/plain", b"no such project", head)
        behaviour = index.behaviour
        if behaviour.json and JSON in handler.headers.get("Accept", ""):
            files = []
            for wheel in wheels:
                item: dict[str, object] = {"filename": wheel.name, "url": f"../../files/{wheel.name}",
                                           "hashes": {"sha256": _sha(wheel)}}
                if behaviour.sizes:
                    item["size"] = wheel.stat().st_size
                if behaviour.upload_times:
                    moment = datetime.datetime.fromtimestamp(wheel.stat().st_mtime, datetime.UTC)
                    item["upload-time"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                if behaviour.pep658:
                    item["core-metadata"] = {"sha256": _metadata_digest(wheel, behaviour)}
                files.append(item)
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()
            return _send(handler, 200, JSON, body, head)
        links = []
        for wheel in wheels:
            extra = f' data-core-metadata="sha256={_metadata_digest(wheel, behaviour)}"' if behaviour.pep658 else ""
            links.append(f'<a href="../../files/{wheel.name}#sha256={_sha(wheel)}"{extra}>{wheel.name}</a>')
        return _send(handler, 200, "text/html", ("<html><body>" + "\n".join(links) + "</body></html>").encode(), head)

    def _file(self, handler: BaseHTTPRequestHandler, index: Index, filename: str, head: bool) -> None:
        metadata = filename.endswith(".metadata")
        wanted = filename.removesuffix(".metadata")
        wheel = next((w for wheels in index.projects.values() for w in wheels if w.name == wanted), None)
        if wheel is None or (metadata and not index.behaviour.pep658):
            return _send(handler, 404, "text/plain", b"no such file", head)
        data = _metadata(wheel) if metadata else wheel.read_bytes()
        asked = handler.headers.get("Range")
        if asked and index.behaviour.ranges and not metadata:
            start, end = _range(asked, len(data))
            extra = {"Content-Range": f"bytes {start}-{end}/{len(data)}", "Accept-Ranges": "bytes"}
            return _send(handler, 206, "application/octet-stream", data[start:end + 1], head, extra)
        return _send(handler, 200, "application/octet-stream", data, head)


def _range(header: str, size: int) -> tuple[int, int]:
    first, _, last = header.removeprefix("bytes=").partition("-")
    if not first:
        return max(0, size - int(last)), size - 1
    return int(first), min(size - 1, int(last)) if last else size - 1


def _send(handler: BaseHTTPRequestHandler, status: int, content_type: str, body: bytes, head: bool,
          headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    if not head:
        handler.wfile.write(body)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _metadata(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        return archive.read(member)


def _metadata_digest(wheel: Path, behaviour: Behaviour) -> str:
    if behaviour.wrong_digest:
        return hashlib.sha256(b"not the metadata").hexdigest()
    return hashlib.sha256(_metadata(wheel)).hexdigest()


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate authority and a server certificate for 127.0.0.1 it signed, made by openssl: the CA's PEM
    (the bundle a client must be given) and a server context holding the leaf. uv (rustls) refuses a CA
    certificate used as the server's own, so the two are distinct."""
    import subprocess

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=folder)

    folder.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=jaxrel test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "leaf.key", "-out", "leaf.csr")
    (folder / "leaf.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                     "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "leaf.ext", "-out", "leaf.pem")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")
    return folder / "ca.pem", context


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), padding: int = 0) -> Path:
    """A small valid pure-Python wheel of ``name`` ``version`` (``padding`` bytes of incompressible data put
    the METADATA far from the end, as in a large wheel)."""
    import random

    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files: dict[str, bytes] = {f"{module}/__init__.py": f"version = {version!r}\n".encode()}
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    files[f"{dist_info}/METADATA"] = metadata.encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if padding:  # after the .dist-info files, so the METADATA lies far from the end; incompressible, reproducible
        files[f"{module}/blob.bin"] = random.Random(f"{name}-{version}").randbytes(padding)
    record = [f"{member},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for member, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path
