"""A project's releases and files from the index pip uses, or from a local wheelhouse.

Sources come from pip's own configuration at run time (``index-url`` — pip's built-in
default when unset —, ``extra-index-url``, ``find-links`` directories; ``PIP_*``
variables included) or from ``--index-url``/``--wheelhouse``; every URL is parsed once
(:mod:`jaxrel.distributions.urls`). Pages are read by :mod:`jaxrel.distributions.transport` (deadline and size
cap), parsed by :mod:`jaxrel.distributions.pages` (PEP 691 JSON where the server offers it, PEP 503 HTML
otherwise; ``file://`` indexes too) and kept an hour by :mod:`jaxrel.distributions.listcache`
(``refresh=True`` re-reads them); a ``file://`` index is read afresh every time, and one whose folder is
missing is ignored with a warning, as pip and uv do. Downloads are cached by sha256 and verified against the
index's hash: a mismatch is an error naming the file, never a silent retry.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from jaxrel._util import localfiles, procs
from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root, sha256_of
from jaxrel.distributions import listcache
from jaxrel.distributions.filenames import name_and_version
from jaxrel.distributions.pages import (
    SHA256,
    IndexFile,
    Listing,
    checked_sha256,
    distribution_filename,
    parse_html,
    parse_json,
    parse_page,
)
from jaxrel.distributions.pipconfig import (
    PipConfigError,
    PipIndexConfig,
    local_link_path,
    pip_command,
    pip_index_config,
)
from jaxrel.distributions.transport import IndexClientError, Limits, fetch, request_for
from jaxrel.distributions.urls import file_url_path, parse_url
from jaxrel.errors import BadInput, JaxrelError

__all__ = ["Index", "IndexClientError", "IndexFile", "Limits", "Listing", "parse_html", "parse_json",
           "pip_default_index", "scan_wheelhouse", "sha256_of"]

LISTING_TTL = listcache.TTL
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
PROJECT = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
Progress = Callable[[str], None]

def scan_wheelhouse(directory: Path) -> list[IndexFile]:
    """The wheels and sdists in a local directory, hashed (hashes cached by size, mtime, ctime and inode)."""
    files = []
    hashes_path = cache_root() / "wheelhouse-hashes.json"
    known: dict[str, object] = {}
    try:
        loaded = json.loads(localfiles.read_bytes(hashes_path, what="the wheelhouse hash cache",
                                                  limit=listcache.MAX_ENTRY))
        known = loaded if isinstance(loaded, dict) else {}
    except (JaxrelError, ValueError, RecursionError):
        known = {}  # a cache is never trusted: damaged or absent is a miss, rewritten below
    changed = False
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if path.name.startswith(".") or not path.is_file():  # a dotfile (the .gitignore `uv build -o` writes) is
            continue  # no distribution, as pip's --find-links skips it; a directory's entries are file names
        if distribution_filename(path.name, None, str(directory), "a file") is None:
            continue
        status = path.stat()
        # ctime and inode change on any rewrite and cannot be set back with utime (as git's index does)
        stamp = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]
        entry = known.get(str(path))
        if isinstance(entry, list) and len(entry) == 5 and entry[:4] == stamp and isinstance(entry[4], str) \
                and SHA256.fullmatch(entry[4]):
            digest = entry[4]
        else:
            digest = sha256_of(path)
            known[str(path)] = [*stamp, digest]
            changed = True
        files.append(IndexFile(path.name, path.resolve().as_uri(), f"wheelhouse {directory}", sha256=digest,
                               size=status.st_size))
    if changed:
        write_bytes_atomically(hashes_path, json.dumps(known).encode())
    return files


def pip_default_index(python: str | None = None) -> str:
    """pip's built-in default index URL, asked of pip itself."""
    command = pip_command(python)
    probe = "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"
    done = procs.run([command[0], "-c", probe])
    if done.returncode != 0 or not done.stdout.strip():
        raise IndexClientError("cannot ask pip for its default index; pass --index-url URL")
    return parse_url(done.stdout.strip(), "pip's default index", error=IndexClientError).text


@dataclass
class Index:
    """The sources one listing is read from: index URLs (in pip's order) and wheelhouse directories.

    ``limits`` bound every network read (default: :meth:`Limits.from_env`); ``timeout``, when
    given, replaces their connect timeout.
    """

    urls: list[str]
    wheelhouses: list[Path] = field(default_factory=list)
    flat_pages: list[str] = field(default_factory=list)  # http(s) find-links: one page listing files of any project
    refresh: bool = False
    cache: Path = field(default_factory=cache_root)
    cafile: str | None = None
    timeout: float | None = None
    progress: Progress | None = None
    limits: Limits = field(default_factory=Limits.from_env)
    requests: int = field(default=0, compare=False)  # listing pages asked of a network index so far
    _ignored: set[str] = field(default_factory=set, compare=False, repr=False)  # local sources skipped, said once

    def __post_init__(self) -> None:
        self.urls = [parse_url(url, "index URL").text for url in self.urls]
        self.flat_pages = [parse_url(url, "find-links URL").text for url in self.flat_pages]
        if self.timeout is not None:
            self.limits = Limits(**{**self.limits.__dict__, "connect": self.timeout})

    @classmethod
    def from_pip(cls, index_url: str | None = None, wheelhouses: Sequence[str | Path] = (), **options: object) -> Index:
        """Sources as pip would use them; ``index_url`` replaces pip's indexes (like ``--index-url``)."""
        if index_url is not None:
            urls = [parse_url(index_url, "--index-url").text]
            folder = file_url_path(urls[0]) if urls[0].startswith("file:") else None
            if folder is not None and not folder.is_dir():  # named on purpose: refused, not skipped
                raise BadInput(f"--index-url {index_url}: {folder} is not a directory; pass the folder of a PEP 503 "
                               "index (the one holding a folder per project)")
            try:  # --index-url replaces pip's sources, not its CA bundle (as on pip's command line)
                config = PipIndexConfig(ca_bundle=pip_index_config().ca_bundle)
            except PipConfigError:
                config = PipIndexConfig()  # the system's CA bundle: verification is never weakened
        else:
            config = pip_index_config()
            urls = [] if config.no_index else [config.index_url or pip_default_index(), *config.extra_index_urls]
        houses = [Path(p) for p in wheelhouses]
        missing = [str(house) for house in houses if not house.is_dir()]
        if missing:
            raise BadInput(f"--wheelhouse {missing[0]}: no such directory; pass a directory of wheels")
        flat = []
        for link in config.find_links:  # as pip reads them: a directory, a file:// directory, or an http(s) page
            link = parse_url(link, config.origin("find_links")).text if "://" in link else link
            local = local_link_path(link)
            if local is not None:
                houses.append(local)
            else:
                flat.append(link)
        return cls(urls, houses, flat, cafile=config.ca_bundle, **options)  # type: ignore[arg-type]

    def pip_config(self) -> PipIndexConfig:
        """These sources as pip's index configuration, for the environments uv (or pip) makes from them: the
        first URL as the index, the others as extra indexes, the wheelhouses as find-links, no URL: no index."""
        return PipIndexConfig(
            index_url=self.urls[0] if self.urls else None, extra_index_urls=tuple(self.urls[1:]),
            find_links=(*(str(house.absolute()) for house in self.wheelhouses if house.is_dir()), *self.flat_pages),
            no_index=not self.urls,
            cert=self.cafile, ca_bundle=self.cafile,
        )

    def describe(self) -> list[str]:
        return [*self.urls, *(f"find-links {page}" for page in self.flat_pages),
                *(f"wheelhouse {h}" for h in self.wheelhouses)]

    # -- listings ---------------------------------------------------------------------------

    def listing(self, project: str) -> Listing:
        """All files of ``project`` from every source; the same filename with two hashes is an error."""
        name = canonicalize_name(project)
        if not PROJECT.fullmatch(name):
            raise BadInput(f"{project[:80]!r} is not a project name (letters, digits, -, _ and .); fix the "
                           "distribution name")
        merged: dict[str, IndexFile] = {}
        for url in self.urls:
            self._merge(merged, self._index_files(url.rstrip("/") + f"/{name}/", url, name) or [])
        for page in self.flat_pages:
            self._merge(merged, self._index_files(page, page, name) or [])
        for house in self.wheelhouses:
            if not house.is_dir():
                self._ignore(f"find-links {house}", "not a directory")
                continue
            self._merge(merged, [f for f in scan_wheelhouse(house) if name_and_version(f.filename)[0] == name],
                        wheelhouse=True)
        return Listing(name, sorted(merged.values(), key=lambda f: (f.version, f.filename)))

    @staticmethod
    def _merge(merged: dict[str, IndexFile], files: list[IndexFile], wheelhouse: bool = False) -> None:
        for file in files:
            known = merged.get(file.filename)
            if known is None:
                merged[file.filename] = file
            elif file.url.startswith("file://") and known.sha256 == file.sha256:
                # a matching local copy is preferred to a download; when the index said when it was uploaded, that stays
                merged[file.filename] = dataclasses.replace(file, upload_time=file.upload_time or known.upload_time)
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

    def _index_files(self, page: str, url: str, project: str) -> list[IndexFile] | None:
        """A project's files on one index page (cached, unless it is a local file, read afresh each time as pip
        and uv read it); ``None`` when the index does not have it."""
        if page.startswith("file:"):
            return self._fetch_page(page, url, project)
        cached = listcache.entry_path(self.cache, page, project)
        age = listcache.age(cached)
        if age is not None and age < listcache.TTL and not self.refresh:
            readable, found = listcache.read(cached)
            if readable:
                return found
        try:
            files = self._fetch_page(page, url, project)
        except IndexClientError as error:
            readable, stale = listcache.read(cached)
            if readable:  # stale beats nothing when the index fails; say so, and why
                self._say(f"warning: {str(error).split('; ')[0]}; using the listing cached "
                          f"{(age or 0) / 60:.0f} min ago")
                return stale
            raise
        listcache.write(cached, page, files)
        return files

    def _fetch_page(self, page: str, source: str, project: str) -> list[IndexFile] | None:
        if page.startswith("file:"):
            folder = file_url_path(page)
            html = folder / "index.html"
            if not html.exists():
                if not folder.parent.is_dir():  # pip and uv ignore it too
                    self._ignore(f"index {source}", f"{folder.parent} is not a directory")
                return None
            try:
                body = localfiles.read_bytes(html, what="the index page", limit=self.limits.max_page)
            except JaxrelError as error:
                raise IndexClientError(str(error)) from None
            return parse_page(body, "text/html", None, html.as_uri(), source, project)
        self.requests += 1
        response = fetch(request_for(page, ACCEPT), limits=self.limits, cafile=self.cafile)
        if response.status == 404:
            return None
        return parse_page(response.body, response.content_type, response.charset, response.url, source, project)

    def _ignore(self, source: str, why: str) -> None:
        """Say once that a local source pip is configured with is skipped, as pip skips it ("Location … is
        ignored"); uv stops on a missing find-links directory, so :meth:`pip_config` leaves it out."""
        if source not in self._ignored:
            self._ignored.add(source)
            self._say(f"warning: {source} is ignored: {why} (pip ignores it too); fix pip's index configuration "
                      "(pip config list)")

    def _say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    # -- downloads --------------------------------------------------------------------------

    def has(self, file: IndexFile) -> bool:
        """Whether ``file`` is here without downloading (a wheelhouse's, or in the cache), not yet verified."""
        return file_url_path(file.url).is_file() if file.url.startswith("file:") else self._cached(file).is_file()

    def _cached(self, file: IndexFile) -> Path:
        """Where the cache keeps ``file`` (by sha256)."""
        if not file.sha256:
            raise IndexClientError(f"{file.filename}: {file.source} lists no sha256, so it cannot be verified; "
                                   "use an index that publishes hashes")
        # both were checked by the page parser; checked again because only they may become a path
        sha = checked_sha256(file.sha256, file.source, f"{file.filename} sha256")
        if distribution_filename(file.filename, None, file.source, "a file name") is None:
            raise IndexClientError(f"{file.source}: {file.filename!r} is not a distribution's file name")
        return self.cache / "files" / sha[:2] / sha / file.filename

    def download(self, file: IndexFile) -> Path:
        """The verified local copy of ``file`` (cached by sha256); a hash mismatch raises, naming the file."""
        if file.url.startswith("file:"):
            local = file_url_path(file.url)
            if not local.is_file():  # absent, or a FIFO or device that hashing would wait on
                raise IndexClientError(f"{local}: listed by {file.source} but missing or not a regular file; "
                                       "refresh the listing")
            self._verify(local, file)
            return local
        target = self._cached(file)
        if target.is_file():
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
        request = request_for(file.url)
        index = request_for(file.source) if "://" in file.source else None
        if index is not None and index.has_header("Authorization") and not request.has_header("Authorization") \
                and urllib.parse.urlsplit(file.url).hostname == urllib.parse.urlsplit(index.full_url).hostname:
            request.add_header("Authorization", index.get_header("Authorization") or "")  # the index's credentials
        cap = min(file.size, self.limits.max_download) if file.size is not None else self.limits.max_download
        size = f" ({file.size / 1e6:.1f} MB)" if file.size is not None else ""
        self._say(f"downloading {file.filename}{size} from {file.source}")
        with destination.open("wb") as out:
            response = fetch(request, limits=self.limits, cafile=self.cafile, download=True, sink=out, max_bytes=cap)
        if response.status == 404:
            raise IndexClientError(f"{file.filename}: listed by {file.source} but its URL answers 404; refresh "
                                   "the listing (--refresh) or check the index")

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
