"""The vocabulary of :mod:`jaxrel.distributions.transport`: what one network read may take (:class:`Limits`), how
it is asked (:func:`request_for`, credentials as Basic auth), what it returns (:class:`Response`), how it fails
(:class:`IndexClientError` and its kinds) and how its URL is shown (:func:`shown_url`, no credentials)."""

from __future__ import annotations

import base64
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from jaxrel._util.text import remember_secret
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["CHUNK", "MIB", "IndexClientError", "Limits", "Response", "TooBig", "TooSlow", "Unreachable", "request_for",
           "shown_url"]

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
    """How long and how much one network read may take, and how often it is tried.

    ``connect``: seconds to connect, and the longest single stall once connected;
    ``deadline``: seconds for a whole index page (redirects and retries included); ``download_deadline``:
    the same for one distribution file; ``max_page`` / ``max_download``: bytes; ``retries``: further
    tries of an idempotent request after a reset, 429 or 5xx.
    """

    connect: float = 30.0
    deadline: float = 120.0
    download_deadline: float = 1800.0
    max_page: int = 64 * MIB
    max_download: int = 8192 * MIB
    retries: int = 3

    VARIABLES = {  # noqa: RUF012 - a constant table, not a field
        "JAXREL_NET_TIMEOUT": ("connect", float), "JAXREL_NET_DEADLINE": ("deadline", float),
        "JAXREL_DOWNLOAD_DEADLINE": ("download_deadline", float),
        "JAXREL_MAX_PAGE_MIB": ("max_page", int), "JAXREL_MAX_DOWNLOAD_MIB": ("max_download", int),
        "JAXREL_NET_RETRIES": ("retries", int),
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, overridden by ``JAXREL_NET_TIMEOUT``, ``JAXREL_NET_DEADLINE``,
        ``JAXREL_DOWNLOAD_DEADLINE`` (seconds), ``JAXREL_MAX_PAGE_MIB``, ``JAXREL_MAX_DOWNLOAD_MIB`` and
        ``JAXREL_NET_RETRIES`` (0 to 10)."""
        env = os.environ if environ is None else environ
        values: dict[str, float | int] = {}
        for variable, (name, kind) in cls.VARIABLES.items():
            text = env.get(variable, "").strip()
            if not text:
                continue
            retries = name == "retries"
            try:
                value = kind(text)
                ok = (0 <= value <= 10) if retries else 0 < value < 10**7
            except (ValueError, OverflowError):
                ok = False
            if not ok:
                unit = "a whole number from 0 to 10" if retries else (
                    "seconds" if kind is float else "a whole number of MiB")
                raise BadInput(f"{variable}={text[:40]!r}: expected {unit}" + ("" if retries else
                               " (a positive number below 10000000)") + "; unset it or fix it")
            values[name] = value * MIB if kind is int and not retries else value
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Response:
    """A complete answer: the final URL (after redirects), status, media type, charset and body."""

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    headers: Mapping[str, str] | None = None


def request_for(url: str, accept: str | None = None) -> urllib.request.Request:
    """A GET of ``url``; credentials written into it (``https://user:token@host/…``) are sent as Basic
    auth, as pip does, rather than left in the host name where DNS would see them. The password and
    the header's token are remembered as secrets: no message prints them, even when an index echoes them."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": accept} if accept else {}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        remember_secret(password)
        remember_secret(token)
        headers["Authorization"] = "Basic " + token
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))
    return urllib.request.Request(url, headers=headers)


def shown_url(url: str) -> str:
    """``url`` without credentials or query (a token endpoint's parameters), for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return url.split("://", 1)[0] + "://…"
    if parts.username is None and "@" not in parts.netloc:
        return urllib.parse.urlunsplit(parts._replace(query=""))
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=""))
