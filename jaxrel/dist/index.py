"""A project's releases and files from the index pip uses, or from a local wheelhouse.

Sources come from pip's own configuration at run time (``index-url`` — pip's built-in
default when unset —, ``extra-index-url``, ``find-links`` directories; ``PIP_*``
variables included) or from ``--index-url``/``--wheelhouse``. Index pages are read as
PEP 691 JSON where the server offers it and as PEP 503 HTML otherwise; ``file://``
indexes work too. Listings are cached on disk for an hour (``refresh=True`` re-reads
them); downloads are cached by sha256 and verified against the index's hash: a
mismatch is an error naming the file, never a silent retry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root, sha256_of
from jaxrel.dist.filenames import name_and_version
from jaxrel.dist.pipconfig import pip_command, pip_index_config
from jaxrel.errors import BadInput, EnvironmentFailure

LISTING_TTL = 3600.0  # seconds a cached listing is trusted without refresh
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
Progress = Callable[[str], None]


class IndexClientError(EnvironmentFailure):
    """An index cannot be read, a file cannot be fetched, or a hash does not match."""


@dataclass(frozen=True)
class IndexFile:
    """One distribution file as an index (or wheelhouse) lists it."""

    filename: str
    url: str
    source: str
    sha256: str | None = None
    requires_python: str | None = None
    yanked: str | None = None  # None: not yanked; otherwise the reason ("" when none given)

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def version(self) -> Version:
        return name_and_version(self.filename)[1]

    @property
    def tags(self) -> frozenset[Tag]:
        """The wheel's tags (empty for an sdist)."""
        return parse_wheel_filename(self.filename)[3] if self.is_wheel else frozenset()

    def supports_python(self, python: str) -> bool:
        """Whether ``Requires-Python`` admits Python ``python`` (``"3.12"``)."""
        if not self.requires_python:
            return True
        try:
            return SpecifierSet(self.requires_python).contains(python + ".0", prereleases=True)
        except InvalidSpecifier:
            return True  # pip ignores an unparsable Requires-Python too

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


class _LinkParser(HTMLParser):
    """Anchors of a PEP 503 page with their ``data-*`` attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _parse_filename_ok(filename: str) -> bool:
    try:
        name_and_version(filename)
        return True
    except (InvalidWheelFilename, InvalidSdistFilename):
        return False


def parse_html(text: str, page_url: str, source: str) -> list[IndexFile]:
    """Files of a PEP 503 project page (hash from the ``#sha256=`` fragment)."""
    parser = _LinkParser()
    parser.feed(text)
    files = []
    for link in parser.links:
        href = link.get("href")
        if not href:
            continue
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        if not _parse_filename_ok(filename):
            continue
        algorithm, _, digest = fragment.partition("=")
        files.append(IndexFile(
            filename=filename, url=url, source=source,
            sha256=digest.lower() if algorithm == "sha256" and digest else None,
            requires_python=link.get("data-requires-python") or None,
            yanked=None if "data-yanked" not in link else (link["data-yanked"] or ""),
        ))
    return files


def parse_json(data: dict[str, object], page_url: str, source: str) -> list[IndexFile]:
    """Files of a PEP 691 JSON project page."""
    files = []
    for item in data.get("files", []):  # type: ignore[attr-defined]
        filename = item["filename"]
        if not _parse_filename_ok(filename):
            continue
        yanked = item.get("yanked", False)
        files.append(IndexFile(
            filename=filename, url=urllib.parse.urljoin(page_url, item["url"]), source=source,
            sha256=(item.get("hashes") or {}).get("sha256"),
            requires_python=item.get("requires-python") or None,
            yanked=None if yanked is False else (yanked if isinstance(yanked, str) else ""),
        ))
    return files


def scan_wheelhouse(directory: Path) -> list[IndexFile]:
    """The wheels and sdists in a local directory, hashed (hashes cached by size, mtime, ctime and inode)."""
    files = []
    hashes_path = cache_root() / "wheelhouse-hashes.json"
    try:
        known: dict[str, list[object]] = json.loads(hashes_path.read_text(encoding="utf-8"))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    changed = False
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if not path.is_file() or not _parse_filename_ok(path.name):
            continue
        stat = path.stat()
        # ctime and inode change on any rewrite and cannot be set back with utime (as git's index does)
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        entry = known.get(str(path))
        if isinstance(entry, list) and len(entry) == 5 and entry[:4] == stamp:
            digest = str(entry[4])
        else:
            digest = sha256_of(path)
            known[str(path)] = [*stamp, digest]
            changed = True
        files.append(IndexFile(path.name, path.resolve().as_uri(), f"wheelhouse {directory}", sha256=digest))
    if changed:
        write_bytes_atomically(hashes_path, json.dumps(known).encode())
    return files


def _request(url: str) -> urllib.request.Request:
    """A GET of ``url`` with credentials written into it (``https://user:token@host/…``) sent as Basic
    auth, as pip does, rather than left in the host name where DNS would see them."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": ACCEPT}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))
    return urllib.request.Request(url, headers=headers)


def pip_default_index(python: str | None = None) -> str:
    """pip's built-in default index URL, asked of pip itself."""
    command = pip_command(python)
    probe = "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"
    done = subprocess.run([command[0], "-c", probe], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise IndexClientError("cannot ask pip for its default index; pass --index-url URL")
    return done.stdout.strip()


@dataclass
class Index:
    """The sources one listing is read from: index URLs (in pip's order) and wheelhouse directories."""

    urls: list[str]
    wheelhouses: list[Path] = field(default_factory=list)
    refresh: bool = False
    cache: Path = field(default_factory=cache_root)
    cafile: str | None = None
    timeout: float = 60.0
    progress: Progress | None = None

    @classmethod
    def from_pip(cls, index_url: str | None = None, wheelhouses: Sequence[str | Path] = (), **options: object) -> Index:
        """Sources as pip would use them; ``index_url`` replaces pip's indexes (like ``--index-url``)."""
        config = pip_index_config()
        if index_url:
            urls = [index_url]
        elif config.no_index:
            urls = []
        else:
            urls = [config.index_url or pip_default_index(), *config.extra_index_urls]
        houses = [Path(p) for p in wheelhouses]
        missing = [str(house) for house in houses if not house.is_dir()]
        if missing:
            raise BadInput(f"--wheelhouse {missing[0]}: no such directory; pass a directory of wheels")
        if not index_url:
            houses += [Path(link.removeprefix("file://")) for link in config.find_links if "://" not in link
                       or link.startswith("file://")]
        cafile = config.raw.get("cert") or None
        return cls(urls, houses, cafile=cafile, **options)  # type: ignore[arg-type]

    def describe(self) -> list[str]:
        return [*self.urls, *(f"wheelhouse {h}" for h in self.wheelhouses)]

    # -- listings ---------------------------------------------------------------------------

    def listing(self, project: str) -> Listing:
        """All files of ``project`` from every source; the same filename with two hashes is an error."""
        name = canonicalize_name(project)
        merged: dict[str, IndexFile] = {}
        found_any = False
        for url in self.urls:
            files = self._index_files(url, name)
            found_any = found_any or files is not None
            self._merge(merged, files or [])
        for house in self.wheelhouses:
            self._merge(merged, [f for f in scan_wheelhouse(house) if name_and_version(f.filename)[0] == name],
                        wheelhouse=True)
        return Listing(name, sorted(merged.values(), key=lambda f: (f.version, f.filename)))

    @staticmethod
    def _merge(merged: dict[str, IndexFile], files: list[IndexFile], wheelhouse: bool = False) -> None:
        for file in files:
            known = merged.get(file.filename)
            if known is None or (file.url.startswith("file://") and known.sha256 == file.sha256):
                merged[file.filename] = file  # a matching local copy is preferred to a download
            elif known.sha256 and file.sha256 and known.sha256 != file.sha256:
                if wheelhouse:
                    raise IndexClientError(
                        f"{file.url.removeprefix('file://')}: sha256 {file.sha256[:12]}… differs from "
                        f"{known.sha256[:12]}… listed by {known.source}; the wheelhouse file was altered or is "
                        "another build: delete it (or rebuild the wheelhouse)"
                    )
                raise IndexClientError(
                    f"{file.filename}: {known.source} and {file.source} list different sha256 hashes; "
                    "one of them serves another build: pass --index-url to use only one"
                )

    def _index_files(self, url: str, project: str) -> list[IndexFile] | None:
        """A project's files on one index (cached); ``None`` when the index does not have it."""
        page = url.rstrip("/") + f"/{project}/"
        cached = self.cache / "listings" / hashlib.sha256(page.encode()).hexdigest()[:24] / f"{project}.json"
        fresh = cached.is_file() and time.time() - cached.stat().st_mtime < LISTING_TTL
        if fresh and not self.refresh:
            readable, found = self._read_cached(cached)
            if readable:
                return found
        try:
            files = self._fetch_page(page, url)
        except IndexClientError:
            readable, stale = self._read_cached(cached) if cached.is_file() else (False, None)
            if readable:  # stale beats nothing when the index is unreachable; say so
                when = time.ctime(cached.stat().st_mtime)
                self._say(f"warning: {url} unreachable; using the listing cached at {when}")
                return stale
            raise
        record = None if files is None else [asdict(f) for f in files]
        write_bytes_atomically(cached, json.dumps({"page": page, "files": record}).encode())
        return files

    @staticmethod
    def _read_cached(path: Path) -> tuple[bool, list[IndexFile] | None]:
        """``(True, listing)`` from a cache entry, ``(False, None)`` when it cannot be read: a cache is never
        trusted, so a truncated or corrupt entry is a miss that the next fetch rewrites."""
        try:
            record = json.loads(path.read_text(encoding="utf-8"))["files"]
            return True, None if record is None else [IndexFile(**item) for item in record]
        except (OSError, ValueError, KeyError, TypeError):
            return False, None

    def _fetch_page(self, page: str, source: str) -> list[IndexFile] | None:
        if page.startswith("file://"):
            folder = Path(urllib.request.url2pathname(urllib.parse.urlparse(page).path))
            html = folder / "index.html"
            if not html.exists():
                return None if folder.parent.exists() else self._unreachable(source, "directory not found")
            return parse_html(html.read_text(encoding="utf-8"), html.as_uri(), source)
        request = _request(page)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl()) as response:
                body = response.read()
                kind = response.headers.get("Content-Type", "").split(";")[0].strip()
                final_url = response.geturl()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            return self._unreachable(source, f"HTTP {error.code} {error.reason}")
        except (urllib.error.URLError, OSError) as error:
            return self._unreachable(source, str(getattr(error, "reason", error)))
        if kind == "application/vnd.pypi.simple.v1+json":
            return parse_json(json.loads(body), final_url, source)
        return parse_html(body.decode("utf-8", "replace"), final_url, source)

    @staticmethod
    def _unreachable(source: str, reason: str) -> list[IndexFile] | None:
        raise IndexClientError(
            f"index {source} is unreachable ({reason}); check the network or pip's index configuration "
            "(pip config list), or pass --index-url / --wheelhouse"
        )

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.cafile) if self.cafile else ssl.create_default_context()

    def _say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    # -- downloads --------------------------------------------------------------------------

    def download(self, file: IndexFile) -> Path:
        """The verified local copy of ``file`` (cached by sha256); a hash mismatch raises, naming the file."""
        if file.url.startswith("file://"):
            local = Path(urllib.request.url2pathname(urllib.parse.urlparse(file.url).path))
            if not local.exists():
                raise IndexClientError(f"{local}: listed by {file.source} but missing; refresh the listing")
            self._verify(local, file)
            return local
        if not file.sha256:
            raise IndexClientError(f"{file.filename}: {file.source} lists no sha256, so it cannot be verified; "
                                   "use an index that publishes hashes")
        target = self.cache / "files" / file.sha256[:2] / file.sha256 / file.filename
        if target.exists():
            self._verify(target, file)
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{file.filename}.{os.getpid()}.part")
        try:
            self._fetch_file(file, partial)
            self._verify(partial, file)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def _fetch_file(self, file: IndexFile, destination: Path) -> None:
        request = _request(file.url)
        index = _request(file.source) if "://" in file.source else None
        if index is not None and index.has_header("Authorization") and not request.has_header("Authorization") \
                and urllib.parse.urlsplit(file.url).hostname == urllib.parse.urlsplit(index.full_url).hostname:
            request.add_header("Authorization", index.get_header("Authorization") or "")  # the index's credentials
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl()) as response:
                size = int(response.headers.get("Content-Length") or 0)
                self._say(f"downloading {file.filename} ({size / 1e6:.1f} MB) from {file.source}")
                with destination.open("wb") as out:
                    shutil.copyfileobj(response, out, 1 << 20)
        except (urllib.error.URLError, OSError) as error:
            raise IndexClientError(
                f"{file.filename}: download from {file.source} failed "
                f"({getattr(error, 'reason', error)}); check the network and retry"
            ) from None

    @staticmethod
    def _verify(path: Path, file: IndexFile) -> None:
        if file.sha256 is None:
            return
        actual = sha256_of(path)
        if actual != file.sha256:
            raise IndexClientError(
                f"{path}: sha256 {actual} does not match {file.sha256} listed by {file.source}; "
                "the file is corrupt or was tampered with: delete it and download again"
            )
