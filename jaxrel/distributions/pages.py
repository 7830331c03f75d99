"""An index's project page (PEP 691 JSON or PEP 503 HTML) parsed into typed :class:`IndexFile` values.

This is the boundary for index answers: nothing past it sees the page's bytes or raw JSON. A
page of the wrong shape, empty, not UTF-8 (gzip bytes sent without a ``Content-Encoding`` header
among them), nested too deep, of an unknown media type or API version, or naming a file with a
sha256 that is not 64 hex digits, a file name that is not one path component, or a file URL of
another scheme raises :class:`IndexClientError` (exit 3) naming the URL, the field, what was
expected and what was found. Links that are not distributions of the project are skipped, as pip
skips them. A sha256 and a file name that pass here are safe to use in a cache path.
"""

from __future__ import annotations

import datetime
import json
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from html.parser import HTMLParser
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel.distributions.filenames import name_and_version, wheel_tags
from jaxrel.distributions.transport import IndexClientError
from jaxrel.distributions.urls import parse_url

__all__ = ["GZIP_MAGIC", "HTML_TYPES", "JSON_TYPES", "SHA256", "IndexFile", "Listing", "PageError", "Said",
           "checked_sha256", "checked_time", "distribution_filename", "file_from_record", "parse_html", "parse_json",
           "parse_page", "parse_time", "printable_reason"]

SHA256 = re.compile(r"[0-9a-f]{64}")
JSON_TYPES = ("application/vnd.pypi.simple.v1+json", "application/vnd.pypi.simple.latest+json")
HTML_TYPES = ("text/html", "application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.latest+html",
              "application/xhtml+xml", "")
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class IndexFile:
    """One distribution file as an index (or wheelhouse) lists it."""

    filename: str
    url: str
    source: str
    sha256: str | None = None
    requires_python: str | None = None
    yanked: str | None = None  # None: not yanked; otherwise the reason ("" when none given)
    size: int | None = None  # bytes, when the index says (PEP 700)
    upload_time: str | None = None  # "YYYY-MM-DDTHH:MM:SSZ", when the index says (PEP 700)
    metadata: bool = False  # the index serves the wheel's METADATA beside it (PEP 658 / PEP 714)
    metadata_sha256: str | None = None  # that METADATA's sha256 as the index announces it (checked when read)

    def uploaded_by(self, moment: datetime.datetime) -> bool:
        """Whether the file was on the index at ``moment`` (timezone-aware); unknown upload times count as yes."""
        return self.upload_time is None or parse_time(self.upload_time) <= moment

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @cached_property
    def version(self) -> Version:  # parsed once: a matrix asks each of jaxlib's ~1,000 files hundreds of times
        return name_and_version(self.filename)[1]

    @cached_property
    def tags(self) -> frozenset[Tag]:
        """The wheel's tags (empty for an sdist)."""
        return wheel_tags(self.filename) if self.is_wheel else frozenset()

    def supports_python(self, python: str) -> bool:
        """Whether ``Requires-Python`` admits Python ``python`` (``"3.12"``)."""
        return not self.requires_python or _admits(self.requires_python, python)

    def installable(self, python: str, tags: Iterable[Tag]) -> bool:
        """A non-yanked wheel for ``python`` whose tags meet ``tags`` (the interpreter's supported tags)."""
        return self.is_wheel and self.yanked is None and self.supports_python(python) and bool(self.tags & set(tags))


@dataclass
class Listing:
    """Every file of one project across the configured sources."""

    project: str
    files: list[IndexFile] = field(default_factory=list)

    def versions(self) -> list[Version]:
        """Every version with at least one file, oldest first."""
        return sorted({file.version for file in self.files})

    def as_of(self, moment: datetime.datetime | None) -> Listing:
        """The listing as the index served it at ``moment`` (``None``: now): files uploaded later are left out,
        and so is every file of a version first uploaded later (a wheelhouse's copy, with no upload time,
        goes with its version)."""
        if moment is None:
            return self
        first: dict[Version, datetime.datetime] = {}
        for file in self.files:
            if file.upload_time is not None:
                when = parse_time(file.upload_time)
                first[file.version] = min(first.get(file.version, when), when)
        return Listing(self.project, [file for file in self.files if file.uploaded_by(moment)
                                      and first.get(file.version, moment) <= moment])

    def first_upload(self, version: Version | str) -> str | None:
        """When ``version``'s first file reached the index (``None``: no file of it has an upload time). Later files
        of a release can come years after (jaxlib's old wheels were uploaded again), so its last upload is no
        answer."""
        times = sorted(f.upload_time for f in self.files_for(version) if f.upload_time)
        return times[0] if times else None

    def files_for(self, version: Version | str) -> list[IndexFile]:
        wanted = Version(str(version))
        return [file for file in self.files if file.version == wanted]

    def sdist(self, version: Version | str) -> IndexFile | None:
        return next((f for f in self.files_for(version) if not f.is_wheel and f.yanked is None), None)

    def wheel_for(self, version: Version | str, python: str, tags: Sequence[Tag]) -> IndexFile | None:
        """The best installable wheel of ``version`` for the interpreter whose supported ``tags`` are given."""
        rank = {tag: i for i, tag in enumerate(tags)}
        fits = [f for f in self.files_for(version) if f.installable(python, rank)]
        return min(fits, key=lambda f: min(rank[tag] for tag in f.tags if tag in rank), default=None)


@lru_cache(maxsize=256)
def _admits(requires_python: str, python: str) -> bool:
    try:
        return SpecifierSet(requires_python).contains(python.removesuffix("t") + ".0", prereleases=True)  # 3.13t
    except InvalidSpecifier:
        return True  # pip ignores an unparsable Requires-Python too


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: object) -> Said:
    names = {dict: "a JSON object", list: "a JSON array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return Said(names.get(type(value), type(value).__name__))


class Said(str):
    """A description of what was found (shown as is, not quoted)."""


class PageError(IndexClientError):
    """An index page that is not what PEP 691 / PEP 503 say it must be."""

    def __init__(self, url: str, where: str, expected: str, found: object) -> None:
        shown = found if isinstance(found, Said) else _shown(found)
        super().__init__(f"{url}: {where} should be {expected}, found {shown}; the index is broken or is not a "
                         "package index: check the URL (pip config list) or pass --index-url")


def distribution_filename(name: object, project: str | None, url: str, where: str) -> str | None:
    """``name`` if it is a file name of a distribution of ``project`` (any project when ``None``); ``None``
    for another project's or a non-distribution file (skipped); a path, not a name, raises."""
    if not isinstance(name, str) or not name:
        raise PageError(url, where, "a file name", name)
    if "/" in name or "\\" in name or "\x00" in name or name.startswith(".") or len(name) > 255:
        raise PageError(url, where, "one path component (a file name)", name)
    try:
        distribution, _ = name_and_version(name)
    except ValueError:  # Invalid…Filename, or a version whose numbers Python will not convert
        return None
    if project is not None and canonicalize_name(distribution) != canonicalize_name(project):
        return None
    return name


def checked_sha256(value: object, url: str, where: str) -> str:
    """A sha256 as 64 lowercase hex digits, else :class:`PageError`."""
    text = value.lower() if isinstance(value, str) else value
    if not isinstance(text, str) or not SHA256.fullmatch(text):
        raise PageError(url, where, "a sha256 of 64 hex digits", value)
    return text


def _joined(page_url: str, href: str, where: str) -> str:
    """``href`` resolved against the page; a link ``urllib`` cannot split (``http://[::1``) is a :class:`PageError`."""
    try:
        return urllib.parse.urljoin(page_url, href)
    except ValueError:
        raise PageError(page_url, where, "a URL", href) from None


def _file_url(href: str, page_url: str, where: str) -> str:
    joined = _joined(page_url, href, where).partition("#")[0]
    allowed = frozenset({"http", "https", "file"} if page_url.startswith("file:") else {"http", "https"})
    parse_url(joined, f"{page_url}: {where}", schemes=allowed, error=IndexClientError)
    return joined


def _text(body: bytes, charset: str | None, url: str) -> str:
    if not body.strip():
        raise PageError(url, "the answer", "a PEP 691 JSON or PEP 503 HTML page", Said("an empty body"))
    try:
        return body.decode(charset or "utf-8")
    except (UnicodeDecodeError, LookupError):
        hint = " (gzip bytes: compressed without a Content-Encoding header)" if body.startswith(GZIP_MAGIC) else ""
        raise PageError(url, "the answer", f"text in {charset or 'UTF-8'}",
                        Said(f"bytes that are not{hint}")) from None


def parse_page(body: bytes, content_type: str, charset: str | None, url: str, source: str,
               project: str | None = None) -> list[IndexFile]:
    """Files of a project page, by its media type (PEP 691 JSON, else PEP 503 HTML)."""
    if content_type in JSON_TYPES:
        text = _text(body, charset, url)
        try:
            data = json.loads(text)
        except RecursionError:
            raise PageError(url, "the JSON", "a PEP 691 page", Said("nesting too deep to read")) from None
        except ValueError as error:
            raise PageError(url, "the JSON", "a PEP 691 page", Said(f"invalid JSON ({str(error)[:80]})")) from None
        return parse_json(data, url, source, project)
    if content_type not in HTML_TYPES:
        raise PageError(url, "Content-Type", "PEP 691 JSON or PEP 503 HTML", content_type)
    text = _text(body, charset, url)
    if not text.lstrip("\ufeff \t\r\n").startswith("<"):
        raise PageError(url, "the HTML", "a PEP 503 page (markup)", text.strip()[:40])
    return parse_html(text, url, source, project)


def parse_json(data: object, page_url: str, source: str, project: str | None = None) -> list[IndexFile]:
    """Files of a PEP 691 JSON project page (already decoded)."""
    if not isinstance(data, dict):
        raise PageError(page_url, "the page", "a JSON object", _kind(data))
    meta = data.get("meta", {})
    version = meta.get("api-version", "1.0") if isinstance(meta, dict) else meta
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise PageError(page_url, "meta.api-version", "1.x", version)
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or (
            project is not None and canonicalize_name(name) != canonicalize_name(project))):
        raise PageError(page_url, "name", f"the project {project}", name)
    items = data.get("files")
    if not isinstance(items, list):
        raise PageError(page_url, "files", "a list", _kind(items))
    return [f for i, item in enumerate(items) if (f := _json_file(item, i, page_url, source, project))]


def _json_file(item: Any, i: int, page_url: str, source: str, project: str | None) -> IndexFile | None:
    where = f"files[{i}]"
    if not isinstance(item, dict):
        raise PageError(page_url, where, "an object", _kind(item))
    filename = distribution_filename(item.get("filename"), project, page_url, f"{where}.filename")
    if filename is None:
        return None
    href = item.get("url")
    if not isinstance(href, str) or not href:
        raise PageError(page_url, f"{where}.url", "a URL", href)
    hashes = item.get("hashes", {})
    if not isinstance(hashes, dict):
        raise PageError(page_url, f"{where}.hashes", "an object", _kind(hashes))
    sha = hashes.get("sha256")
    requires = item.get("requires-python")
    if requires is not None and not isinstance(requires, str):
        raise PageError(page_url, f"{where}.requires-python", "a string", requires)
    yanked = item.get("yanked", False)
    if not isinstance(yanked, (bool, str)):
        raise PageError(page_url, f"{where}.yanked", "true, false or a reason", yanked)
    size = item.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise PageError(page_url, f"{where}.size", "a number of bytes", size)
    uploaded = item.get("upload-time")
    if uploaded is not None:
        uploaded = checked_time(uploaded, page_url, f"{where}.upload-time")
    metadata, metadata_sha256 = _served_metadata(item.get("core-metadata", item.get("dist-info-metadata", False)),
                                                 page_url, f"{where}.core-metadata")
    return IndexFile(
        filename=filename, url=_file_url(href, page_url, f"{where}.url"), source=source,
        sha256=None if sha is None else checked_sha256(sha, page_url, f"{where}.hashes.sha256"),
        requires_python=requires or None,
        yanked=None if yanked is False else (printable_reason(yanked) if isinstance(yanked, str) else ""), size=size,
        upload_time=uploaded, metadata=metadata, metadata_sha256=metadata_sha256,
    )


def printable_reason(text: str, width: int = 300) -> str:
    """Text an index wrote for people (a yank reason) with every control character escaped (a terminal never
    gets an escape sequence from an index) and its length bounded."""
    clean = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: width * 2])
    return clean if len(clean) <= width else clean[: width - 1] + "…"


def _served_metadata(value: object, url: str, where: str) -> tuple[bool, str | None]:
    """PEP 658/714 ``core-metadata`` (JSON: true, false or a hashes object; HTML: ``"true"`` or ``"sha256=…"``) as
    (served, its sha256). Metadata announced with hashes but no sha256 is not used (it could not be checked)."""
    if value is None or value is False or value == "false":
        return False, None
    if value is True or value == "true" or value == "":
        return True, None
    if isinstance(value, str):
        algorithm, _, digest = value.partition("=")
        value = {algorithm.strip().lower(): digest.strip()}
    if not isinstance(value, dict):
        raise PageError(url, where, "true, false or a hashes object", value)
    if "sha256" not in value:
        return False, None
    return True, checked_sha256(value["sha256"], url, f"{where}.sha256")


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time (``2026-07-16T20:32:16.123Z``) as an aware UTC datetime; ``ValueError`` otherwise, a time
    whose offset carries it past what ``datetime`` holds (``9999-12-31T23:59:59-01:00``) included."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        return moment.astimezone(datetime.UTC)
    except OverflowError:
        raise ValueError(f"{text[:40]!r} is beyond the years a datetime holds") from None


def checked_time(value: object, url: str, where: str) -> str:
    """An index's upload time normalized to ``YYYY-MM-DDTHH:MM:SSZ``, else :class:`PageError`."""
    if not isinstance(value, str) or len(value) > 40:
        raise PageError(url, where, "an ISO 8601 time", value)
    try:
        return parse_time(value).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise PageError(url, where, "an ISO 8601 time", value) from None


class _LinkParser(HTMLParser):
    """Anchors of a PEP 503 page with their ``data-*`` attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def parse_html(text: str, page_url: str, source: str, project: str | None = None) -> list[IndexFile]:
    """Files of a PEP 503 project page (hash from the ``#sha256=`` fragment)."""
    parser = _LinkParser()
    parser.feed(text)
    parser.close()
    files = []
    for i, link in enumerate(parser.links):
        href = link.get("href")
        if not href:
            continue
        where = f"link {i + 1} ({_shown(href)})"
        url, _, fragment = _joined(page_url, href, where).partition("#")
        filename = distribution_filename(urllib.parse.unquote(url.rsplit("/", 1)[-1]), project, page_url,
                                         f"{where} file name")
        if filename is None:
            continue
        algorithm, _, digest = fragment.partition("=")
        served = link.get("data-core-metadata", link.get("data-dist-info-metadata"))
        metadata, metadata_sha256 = (False, None) if served is None and "data-core-metadata" not in link \
            and "data-dist-info-metadata" not in link else _served_metadata(served or "true", page_url,
                                                                            f"{where} data-core-metadata")
        files.append(IndexFile(
            filename=filename, url=_file_url(url, page_url, where), source=source,
            sha256=checked_sha256(digest, page_url, f"{where} #sha256") if algorithm == "sha256" else None,
            requires_python=link.get("data-requires-python") or None,
            yanked=None if "data-yanked" not in link else printable_reason(link["data-yanked"] or ""),
            metadata=metadata, metadata_sha256=metadata_sha256,
        ))
    return files


def file_from_record(item: object, source_page: str) -> IndexFile:
    """An :class:`IndexFile` from jaxrel's own cache, checked like an index's (a damaged entry raises)."""
    if not isinstance(item, dict) or set(item) - set(IndexFile.__dataclass_fields__):
        raise PageError(source_page, "a cached file", "an IndexFile record", item)
    name = distribution_filename(item.get("filename"), None, source_page, "filename")
    strings = ("url", "source")
    optional = ("requires_python", "yanked")
    if name is None or any(not isinstance(item.get(k), str) for k in strings) or any(
            item.get(k) is not None and not isinstance(item.get(k), str) for k in optional):
        raise PageError(source_page, "a cached file", "an IndexFile record", item)
    size = item.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise PageError(source_page, "a cached size", "a number of bytes", size)
    sha = item.get("sha256")
    digest = None if sha is None else checked_sha256(sha, source_page, "sha256")
    uploaded = item.get("upload_time")
    uploaded = None if uploaded is None else checked_time(uploaded, source_page, "upload_time")
    metadata = item.get("metadata", False)
    if not isinstance(metadata, bool):
        raise PageError(source_page, "a cached file", "an IndexFile record", item)
    served = item.get("metadata_sha256")
    metadata_sha256 = None if served is None else checked_sha256(served, source_page, "metadata_sha256")
    yanked = item.get("yanked")
    return IndexFile(name, item["url"], item["source"], digest, item.get("requires_python"),
                     None if yanked is None else printable_reason(yanked), size, uploaded, metadata, metadata_sha256)
