"""The real index as ``scripts/record_audit.py`` recorded it (tests/data/audit/index.json.gz: every listing of the
jax family with upload times, every METADATA's headers), served on loopback as a PEP 691 index with PEP 658
metadata (:class:`Recorded`)."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

RECORDING = Path(__file__).resolve().parent / "data" / "audit" / "index.json.gz"
DATA: dict[str, Any] = json.loads(gzip.decompress(RECORDING.read_bytes()))
LISTINGS: dict[str, list[dict[str, Any]]] = {str(canonicalize_name(k)): v for k, v in DATA["listings"].items()}


class Recorded:
    """The recording as an index: JSON pages, ``<file>.metadata`` for every METADATA recorded, nothing else."""

    def __init__(self) -> None:
        served = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = self.path.strip("/").split("/")
                if parts[0] == "simple" and len(parts) == 2 and parts[1] in LISTINGS:
                    return self.send(served.page(parts[1]), "application/vnd.pypi.simple.v1+json")
                name = parts[-1].removesuffix(".metadata")
                if parts[0] == "files" and parts[-1].endswith(".metadata") and name in DATA["metadata"]:
                    return self.send(DATA["metadata"][name].encode(), "text/plain")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None

            def send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def page(self, project: str) -> bytes:
        files = []
        for item in LISTINGS[project]:
            text = DATA["metadata"].get(item["filename"])
            served = {"sha256": hashlib.sha256(text.encode()).hexdigest()} if text is not None else False
            files.append({"filename": item["filename"], "url": f"/files/{item['filename']}", "hashes": {},
                          "size": item["size"], "upload-time": item["upload-time"],
                          "yanked": item["yanked"] if item["yanked"] is not None else False,
                          "core-metadata": served,
                          **({"requires-python": item["requires-python"]} if item["requires-python"] else {})})
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/simple/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
