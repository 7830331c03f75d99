"""pip's own index configuration, read at run time and decoded exactly as pip applies it.

uv does not read pip's configuration; environments built with uv must still see the indexes,
find-links and CA bundle pip is configured with. Nothing here names an index: it all comes from
pip, asked once per process (``pip config list``).

How pip's values are read (pip's ``ConfigOptionParser``, followed step by step):

- ``pip config list`` prints every key as ``section.key=<repr of the value>``; each value is decoded
  as the Python string literal it is (:func:`ast.literal_eval`), so a multi-line
  ``extra-index-url`` (printed with ``\\n``) or a value holding a quote (printed in double quotes)
  reads back exactly. A line that does not decode is refused, never skipped.
- Sections apply in pip's order for one command: ``[global]``, then the command's own section
  (``[install]`` for ``pip install``; another command's section is ignored), then ``PIP_*``
  variables (``:env:``). An empty value is ignored, as pip ignores it. A later value replaces an
  earlier one, lists included (``extra-index-url`` in ``[install]`` replaces ``[global]``'s).
- Lists (``extra-index-url``, ``find-links``, ``trusted-host``) are split on whitespace; booleans
  (``no-index``) take pip's truth words (``yes``/``no``, ``true``/``false``, ``on``/``off``, ``1``/``0``)
  and anything else is refused, as pip refuses it; paths (``cert``, ``client-cert``) have ``~``
  expanded; every long name pip accepts counts (``pypi-url`` sets the index URL too).
- The CA bundle pip verifies with is not always its ``cert``: pip's HTTP library (requests) takes
  ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, before it (measured with pip 23.2). jaxrel's
  client and the uv it starts use that same bundle (:attr:`PipIndexConfig.ca_bundle`).

When pip cannot be asked, or refuses its own configuration, jaxrel refuses too (exit 3), naming
pip's complaint and the fix: falling back to pip's default index would send a user who set up a
private index to the public one (dependency confusion). Standard library only (the noxfile imports it).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from jaxrel._util import procs
from jaxrel._util.text import redact, shorten
from jaxrel.distributions.urls import file_url_path, parse_url
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["COMMAND", "PipConfigError", "PipIndexConfig", "decode_config_list", "local_link_path", "parse_config_list",
           "pip_command", "pip_index_config"]

COMMAND = "install"  # the pip command whose section applies: jaxrel reads indexes to install what it finds
_ENV = ":env:"
# pip's long option names jaxrel reads → (the option's dest, how pip converts a configured value)
_OPTIONS = {
    "index-url": ("index_url", "store"), "pypi-url": ("index_url", "store"),
    "extra-index-url": ("extra_index_urls", "append"), "find-links": ("find_links", "append"),
    "trusted-host": ("trusted_hosts", "append"), "no-index": ("no_index", "bool"),
    "cert": ("cert", "path"), "client-cert": ("client_cert", "path"),
}
_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "f", "false", "off", "0"})


class PipConfigError(EnvironmentFailure):
    """pip cannot be asked for its configuration, or refuses it (exit 3)."""


@dataclass(frozen=True)
class PipIndexConfig:
    """The index settings pip would use."""

    index_url: str | None = None  # None: pip's built-in default
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    cert: str | None = None
    client_cert: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    ca_bundle: str | None = None  # what pip verifies TLS with: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, else cert
    origins: dict[str, str] = field(default_factory=dict, compare=False)  # dest → where pip took it from

    def origin(self, dest: str) -> str:
        """Where the setting ``dest`` came from, for a message."""
        return self.origins.get(dest, "pip's configuration (pip config list)")

    def uv_environment(self) -> dict[str, str]:
        """Environment variables making uv resolve from the same places as pip, and never download a Python."""
        env = {"UV_PYTHON_DOWNLOADS": "never", "UV_INDEX_STRATEGY": "unsafe-best-match"}
        if self.index_url and not self.no_index:  # uv still asks an index it is given beside UV_NO_INDEX
            env["UV_INDEX_URL"] = self.index_url
        if self.extra_index_urls and not self.no_index:
            env["UV_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        links = self.present_find_links()
        if links:
            env["UV_FIND_LINKS"] = ",".join(links)
        if self.no_index:
            env["UV_NO_INDEX"] = "1"
        if self.ca_bundle or self.cert:
            env["SSL_CERT_FILE"] = self.ca_bundle or self.cert  # type: ignore[assignment]
        if self.trusted_hosts:
            env["UV_INSECURE_HOST"] = " ".join(self.trusted_hosts)
        return env

    def present_find_links(self) -> list[str]:
        """The ``find-links`` pip reads: http(s) pages, and local paths or ``file://`` URLs that exist. pip ignores a
        missing one with a warning ("Location … is ignored"); uv stops on it, so it is not handed to uv."""
        return [link for link in self.find_links if (path := local_link_path(link)) is None or path.exists()]

    def pip_arguments(self) -> list[str]:
        """The same sources as ``pip install`` options (for environments made without uv)."""
        args = ["--no-index"] if self.no_index else []
        args += ["--index-url", self.index_url] if self.index_url and not self.no_index else []
        args += [arg for url in self.extra_index_urls if not self.no_index for arg in ("--extra-index-url", url)]
        args += [arg for link in self.find_links for arg in ("--find-links", link)]
        args += [arg for host in self.trusted_hosts for arg in ("--trusted-host", host)]
        args += ["--client-cert", self.client_cert] if self.client_cert else []
        return args + (["--cert", self.cert] if self.cert else [])


def local_link_path(link: str) -> Path | None:
    """The local path a ``find-links`` value names (a path, ``~`` expanded, or a ``file://`` URL); ``None`` for a
    page on a server."""
    if "://" not in link:
        return Path(os.path.expanduser(link))
    if link.startswith("file:"):
        return file_url_path(link)
    return None


def decode_config_list(text: str) -> list[tuple[str, str, str]]:
    """``(section, key, value)`` for each line ``pip config list`` printed, values decoded from their repr.

    A key holds no ``=`` (configparser splits on it) but a section name may, so the line is split at
    the first ``=`` whose remainder is one Python string literal. A line that is none raises
    :class:`PipConfigError`: pip wrote something jaxrel cannot read, so it would not know the indexes.
    """
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        decoded = None
        at = line.find("=")
        while at > 0 and decoded is None:
            try:
                value = ast.literal_eval(line[at + 1:].strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                value = None
            if isinstance(value, str) and "." in line[:at]:
                section, _, key = line[:at].partition(".") if not line.startswith(_ENV) else (
                    _ENV, ".", line[len(_ENV) + 1:at])
                decoded = (section, key.strip().lower().replace("_", "-"), value)
            at = line.find("=", at + 1)
        if decoded is None:
            shown = shorten(redact(line))
            raise PipConfigError(f"pip config list printed a line jaxrel cannot read ({shown!r}); check pip's "
                                 "configuration files and PIP_* variables, or pass --index-url")
        entries.append(decoded)
    return entries


def _origin(section: str, key: str) -> str:
    if section == _ENV:
        return f"PIP_{key.upper().replace('-', '_')} (pip's configuration)"
    return f"{section}.{key} in pip's configuration (pip config list)"


def _boolean(value: str, where: str) -> bool:
    word = value.strip().lower()
    if word not in _TRUE | _FALSE:
        raise BadInput(f"{where}: {shorten(value)!r} is not a boolean (pip takes yes/no, true/false, on/off, 1/0); "
                       "fix pip's configuration")
    return word in _TRUE


def config_from_entries(entries: Iterable[tuple[str, str, str]], command: str = COMMAND,
                        environ: Mapping[str, str] | None = None) -> PipIndexConfig:
    """The settings pip's option parser derives for ``command`` from decoded ``pip config list`` entries
    (``environ``: the variables pip's HTTP library reads, default none)."""
    listed = list(entries)
    chosen: dict[str, str] = {}  # dest → the value that wins
    origins: dict[str, str] = {}
    for section in ("global", command, _ENV):
        for entry_section, key, value in listed:
            if entry_section != section or not value or key not in _OPTIONS:
                continue  # pip ignores empty values and other commands' sections
            dest, kind = _OPTIONS[key]
            origins[dest] = _origin(section, key)
            if kind == "bool":
                _boolean(value, origins[dest])  # pip converts (and refuses) every value, not only the last
            chosen[dest] = value

    def listed_of(dest: str) -> tuple[str, ...]:
        return tuple(chosen.get(dest, "").split())

    def path_of(dest: str) -> str | None:
        return os.path.expanduser(chosen[dest]) if dest in chosen else None

    index_url = chosen.get("index_url")
    extra_index_urls = listed_of("extra_index_urls")
    for url in ([index_url] if index_url else []) + list(extra_index_urls):  # checked once: later uses get URLs
        parse_url(url, origins["index_url" if url == index_url else "extra_index_urls"])
    cert = path_of("cert")
    return PipIndexConfig(
        index_url=index_url, extra_index_urls=extra_index_urls, find_links=listed_of("find_links"),
        no_index="no_index" in chosen and _boolean(chosen["no_index"], origins["no_index"]),
        cert=cert, client_cert=path_of("client_cert"), trusted_hosts=listed_of("trusted_hosts"),
        ca_bundle=_ca_bundle(environ or {}, cert, origins), origins=origins,
    )


def _ca_bundle(environ: Mapping[str, str], cert: str | None, origins: dict[str, str]) -> str | None:
    for variable in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests' order, before pip's own verify
        if environ.get(variable):
            origins["ca_bundle"] = f"{variable} (pip's HTTP library prefers it to pip's cert)"
            return environ[variable]
    if cert:
        origins["ca_bundle"] = origins["cert"]
    return cert or None


def parse_config_list(text: str, command: str = COMMAND, environ: Mapping[str, str] | None = None) -> PipIndexConfig:
    """The settings from ``pip config list`` output, as ``pip <command>`` applies them."""
    return config_from_entries(decode_config_list(text), command, environ)


def pip_command(python: str | None = None) -> list[str]:
    """A command running pip: ``python``'s (default this interpreter's), else the base interpreter's.

    Environments made by uv have no pip of their own; the interpreter they were made
    from does, and its configuration is the machine's. :class:`PipConfigError` when none has pip.
    """
    candidates = [python] if python else [sys.executable, getattr(sys, "_base_executable", None),
                                          os.path.join(sys.base_prefix, "bin", "python3")]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            if procs.run([candidate, "-c", "import pip"], text=False, timeout=60).returncode == 0:
                return [candidate, "-m", "pip"]
        except OSError:
            continue
    raise PipConfigError(f"no pip to ask for the index configuration ({', '.join(c for c in candidates if c)} "
                         "have none); install pip (python3 -m ensurepip) or pass --index-url")


@cache
def pip_index_config(python: str | None = None, command: str = COMMAND) -> PipIndexConfig:
    """Ask pip (of ``python``, default: see :func:`pip_command`) for its index configuration."""
    try:
        done = procs.run([*pip_command(python), "config", "list"], timeout=120,
                         env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except OSError as error:
        raise PipConfigError(f"cannot run pip to read its configuration ({error}); fix the Python installation "
                             "or pass --index-url") from None
    if done.returncode != 0:
        said = next((line.strip() for line in (done.stderr or "").splitlines() if line.strip()), "no message")
        raise PipConfigError(f"pip cannot read its own configuration (pip config list exited {done.returncode}: "
                             f"{shorten(said, 160)}); fix the file or PIP_* variable pip names, or pass --index-url")
    return parse_config_list(done.stdout, command, os.environ)
