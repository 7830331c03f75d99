"""URLs from anywhere (the command line, pip's configuration, ``~/.pypirc``, WORKSPACE), parsed once.

:func:`parse_url` turns text into a :class:`Url` or raises :class:`~jaxrel.errors.BadInput`
naming where the text came from (``--index-url``, ``PIP_INDEX_URL``, …), what was expected and
what was found: no scheme, an unsupported scheme, no host, a port that is not 1–65535, spaces or
control characters (CRLF), a malformed IPv6 literal. Nothing past this module splits URL text.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util.text import redact, remember_secret
from jaxrel.errors import BadInput, JaxrelError

__all__ = ["INDEX_SCHEMES", "Url", "WEB", "file_url_path", "parse_url"]

WEB = frozenset({"http", "https"})
INDEX_SCHEMES = frozenset({"http", "https", "file"})


@dataclass(frozen=True)
class Url:
    """A checked absolute URL; ``text`` is exactly what was given (credentials included)."""

    text: str
    scheme: str
    host: str  # "" for file:// URLs; an IPv6 literal without brackets
    port: int | None
    path: str

    @property
    def is_file(self) -> bool:
        return self.scheme == "file"

    def join(self, *parts: str) -> str:
        """This URL with ``parts`` appended as path segments (one slash between each)."""
        return "/".join([self.text.rstrip("/"), *(p.strip("/") for p in parts)]) + "/"

    def __str__(self) -> str:
        return self.text


def _masked(text: str) -> str:
    """``text`` with everything between ``://`` and its last ``@`` masked (``user:***@``, or ``***@`` when the user
    part is unclear): a password may hold ``/``, ``@`` or a space, which end userinfo for a URL parser. What was
    masked is remembered as a secret, so no later message prints it either."""
    scheme, separator, rest = text.partition("://")
    if not separator or "@" not in rest:
        return text
    userinfo, _, after = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if colon or len(userinfo) >= 8:  # a password, or a bare token (``https://TOKEN@host``); not a short user name
        remember_secret(password if colon else userinfo)
    shown_user = f"{user}:" if colon and user and not any(c in user for c in "/ \t@") else ""
    return f"{scheme}://{shown_user}***@{after}"


def _short(text: str) -> str:
    """The URL for an error line: secrets and userinfo out first, then cut."""
    text = redact(_masked(text))
    return repr(text if len(text) <= 80 else text[:77] + "...")


def parse_url(text: object, origin: str, schemes: frozenset[str] = INDEX_SCHEMES,
              error: type[JaxrelError] = BadInput) -> Url:
    """``text`` as an absolute URL with one of ``schemes``; ``origin`` names where it came from.

    Raises ``error`` (default :class:`BadInput`, exit 2) naming ``origin``, the expectation and
    what was found.
    """
    allowed = " or ".join(f"{s}://" for s in sorted(schemes))

    def bad(why: str) -> JaxrelError:
        userinfo = isinstance(text, str) and "@" in text.partition("://")[2]
        hint = " (a password holding / @ : or a space must be percent-encoded: %2F %40 %3A %20)" if userinfo else ""
        return error(f"{origin}: {_short(str(text))} is not a usable URL ({why}){hint}; expected an absolute "
                     f"{allowed} URL such as <scheme>://host/simple/")

    if not isinstance(text, str):
        raise bad(f"a {type(text).__name__}, not text")
    if not text:
        raise bad("it is empty")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise bad("it holds spaces or control characters (a line break?)")
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as failure:  # "Invalid IPv6 URL" and friends
        raise bad(str(failure)) from None
    scheme = parts.scheme.lower()
    if not scheme or "://" not in text:
        raise bad("no scheme")
    if scheme not in schemes:
        raise bad(f"the scheme {scheme}:// is not supported")
    try:
        port = parts.port
    except ValueError:
        raise bad("its port is not a number from 1 to 65535") from None
    if port == 0:
        raise bad("its port is not a number from 1 to 65535")
    host = parts.hostname or ""
    if scheme != "file":
        if not host:
            raise bad("no host")
        if "[" in parts.netloc.rsplit("@", 1)[-1]:
            try:
                ipaddress.IPv6Address(host.split("%", 1)[0])
            except ValueError:
                raise bad(f"[{host}] is not an IPv6 address") from None
        elif not all(label and len(label) <= 63 for label in host.split(".") if host != "") or len(host) > 253:
            raise bad(f"the host {host!r} is not a host name")
        elif any(c in host for c in "[]\\{}|^`\"<>"):
            raise bad(f"the host {host!r} is not a host name")
    elif parts.netloc not in ("", "localhost"):
        raise bad("a file:// URL names no host (file:///path)")
    remember_secret(parts.password)  # an index password written into the URL is never printed, echoed or not
    return Url(text, scheme, host, port, parts.path)


def file_url_path(url: str) -> Path:
    """The local path a ``file:`` URL names (percent-escapes decoded, as pip and urllib read it)."""
    return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
