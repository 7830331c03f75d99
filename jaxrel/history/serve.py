"""``jaxrel history serve``: the HUD and live queries on loopback, from the store as it is now.

The same static site :mod:`jaxrel.history.publish` writes, in a directory of its own, republished
when the store has changed since (a run ingested, a culprit kept, an annotation made: checked at each
page request, one small query), and one live endpoint the static site cannot have:
``/api/v1/query?pin=jax==0.11.0&pin=jaxlib==0.11.0[&python=3.12][&passes=N]``, the answer
``jaxrel history query --json`` gives (HTTP 200 whatever the verdict; 400 with ``{"error": …}`` for
bad pins). Only loopback addresses are served: the store may hold what a team keeps to itself.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jaxrel.errors import ExitCode
from jaxrel.history import publish, query
from jaxrel.history.store import HistoryError, open_store

__all__ = ["HistoryServer", "make_server"]

MAX_QUERY = 16 << 10  # bytes of a query string


class HistoryServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], db: str, site: Path, commit_url: str) -> None:
        self.db, self.site, self.commit_url = db, site, commit_url
        self.generation: tuple[Any, ...] | None = None
        self.lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)

    def refresh(self) -> None:
        """Republish the site when the store changed since the last time."""
        with self.lock:
            store = open_store(self.db, create=False)
            try:
                now = tuple(store.rows("SELECT (SELECT COUNT(*) FROM runs), (SELECT MAX(id) FROM runs), (SELECT "
                                       "COUNT(*) FROM culprits), (SELECT COUNT(*) FROM annotations)")[0])
                if now != self.generation:
                    publish.publish(store, self.site, commit_url=self.commit_url)
                    self.generation = now
            finally:
                store.close()

    def ask(self, parameters: dict[str, list[str]]) -> dict[str, Any]:
        pins = query.parse_pins(parameters.get("pin", []))
        if not pins:
            raise HistoryError("no pin: ask with ?pin=NAME==VERSION (one per wheel of the set)")
        passes = parameters.get("passes", ["1"])[0]
        if not passes.isdigit() or not 1 <= int(passes) <= 1000:
            raise HistoryError(f"passes={passes[:20]!r}: expected a number from 1 to 1000")
        store = open_store(self.db, create=False)
        try:
            return query.query(store, pins, parameters.get("python", [None])[0], int(passes)).to_json()
        finally:
            store.close()


class _Handler(SimpleHTTPRequestHandler):
    server: HistoryServer

    def __init__(self, request: Any, client_address: Any, server: HistoryServer) -> None:
        super().__init__(request, client_address, server, directory=str(server.site))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # the console stays for the one line serve prints

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/api/v1/query":
            self._query(parts.query)
            return
        try:
            self.server.refresh()
        except HistoryError as error:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(error)})
            return
        super().do_GET()

    def _query(self, text: str) -> None:
        if len(text) > MAX_QUERY:
            self._json(HTTPStatus.REQUEST_URI_TOO_LONG, {"error": f"a query of at most {MAX_QUERY} bytes"})
            return
        try:
            answer = self.server.ask(parse_qs(text, max_num_fields=query.MAX_PINS + 4))
        except ValueError:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"too many fields: at most {query.MAX_PINS} pins"})
            return
        except HistoryError as error:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(error)})
            return
        self._json(HTTPStatus.OK, answer)

    def _json(self, status: HTTPStatus, data: dict[str, Any]) -> None:
        body = (json.dumps(data, indent=1) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def make_server(db: str, site: Path, host: str = "127.0.0.1", port: int = 0,
                commit_url: str = publish.COMMIT_URL, on_ready: Callable[[str], None] | None = None) -> HistoryServer:
    """A server for the store ``db`` (loopback only), its site in ``site``; published once before it returns."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise HistoryError(f"--host {host[:60]}: serve binds loopback only (127.0.0.1, ::1); put a reverse proxy in "
                           "front of it, or publish the static site, to share the HUD")
    open_store(db, create=False).close()  # a missing or foreign store is refused before anything listens
    site.mkdir(parents=True, exist_ok=True)
    try:
        server = HistoryServer((host, port), db, site, commit_url)
    except OSError as error:
        raise HistoryError(f"--port {port}: cannot listen on {host} ({error.strerror}); pick a free port",
                           exit_code=ExitCode.ENVIRONMENT) from None
    server.refresh()
    if on_ready is not None:
        on_ready(f"http://{host if ':' not in host else f'[{host}]'}:{server.server_address[1]}/")
    return server
