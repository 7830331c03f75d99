"""pip's own index configuration, read at run time and translated for uv.

uv does not read pip's configuration; environments built with uv must still see
the indexes and find-links pip is configured with (``pip config list``, including
``PIP_*`` variables). Nothing here names an index: it all comes from pip. Index URLs are
checked here (:func:`jaxrel.distributions.urls.parse_url`): one that is not a URL is bad input naming
the variable or the configuration section it came from.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from functools import cache

from jaxrel._util import procs
from jaxrel.distributions.urls import parse_url

__all__ = ["PipIndexConfig", "parse_config_list", "pip_command", "pip_index_config"]

_LINE = re.compile(r"^(?P<section>:env:|[\w-]+)\.(?P<key>[\w-]+)='(?P<value>.*)'$")
_FILE_SECTIONS = ("global", "install", "download")  # increasing precedence; PIP_* (":env:") beats all


@dataclass(frozen=True)
class PipIndexConfig:
    """The index settings pip would use."""

    index_url: str | None = None  # None: pip's built-in default
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    raw: dict[str, str] = field(default_factory=dict, compare=False)

    def uv_environment(self) -> dict[str, str]:
        """Environment variables making uv resolve from the same places as pip, and never download a Python."""
        env = {"UV_PYTHON_DOWNLOADS": "never", "UV_INDEX_STRATEGY": "unsafe-best-match"}
        if self.index_url:
            env["UV_INDEX_URL"] = self.index_url
        if self.extra_index_urls:
            env["UV_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        if self.find_links:
            env["UV_FIND_LINKS"] = ",".join(self.find_links)
        if self.no_index:
            env["UV_NO_INDEX"] = "1"
        if self.raw.get("cert"):
            env["SSL_CERT_FILE"] = self.raw["cert"]
        return env

    def pip_arguments(self) -> list[str]:
        """The same sources as ``pip install`` options (for environments made without uv)."""
        args = ["--no-index"] if self.no_index else []
        args += ["--index-url", self.index_url] if self.index_url else []
        args += [arg for url in self.extra_index_urls for arg in ("--extra-index-url", url)]
        args += [arg for link in self.find_links for arg in ("--find-links", link)]
        return args + (["--cert", self.raw["cert"]] if self.raw.get("cert") else [])


def parse_config_list(text: str) -> PipIndexConfig:
    """Parse ``pip config list`` output; environment values beat files, later files beat earlier."""
    ranked: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        section = match["section"] if match else ""
        if not match or (section != ":env:" and section not in _FILE_SECTIONS):
            continue
        rank = len(_FILE_SECTIONS) if section == ":env:" else _FILE_SECTIONS.index(section)
        key = match["key"]
        if key not in ranked or rank >= ranked[key][0]:
            ranked[key] = (rank, match["value"])
    values = {key: value for key, (_, value) in ranked.items()}

    def origin(key: str) -> str:
        """Where pip took ``key`` from, for a message: the variable, or the configuration file's section."""
        rank = ranked[key][0]
        if rank == len(_FILE_SECTIONS):
            return f"PIP_{key.upper().replace('-', '_')} (pip's configuration)"
        return f"{_FILE_SECTIONS[rank]}.{key} in pip's configuration (pip config list)"

    for key in ("index-url", "extra-index-url"):  # checked once here: every later use gets a URL
        for text in values.get(key, "").split() if key in values else []:
            parse_url(text, origin(key))
    return PipIndexConfig(
        index_url=values.get("index-url") or None,
        extra_index_urls=tuple(values.get("extra-index-url", "").split()),
        find_links=tuple(values.get("find-links", "").split()),
        no_index=values.get("no-index", "").lower() in ("1", "true", "yes", "on"),
        raw=values,
    )


def pip_command(python: str | None = None) -> list[str]:
    """A command running pip: ``python``'s (default this interpreter's), else the base interpreter's.

    Environments made by uv have no pip of their own; the interpreter they were made
    from does, and its configuration is the machine's.
    """
    candidates = [python] if python else [sys.executable, getattr(sys, "_base_executable", None),
                                          os.path.join(sys.base_prefix, "bin", "python3")]
    for candidate in candidates:
        if candidate and procs.run([candidate, "-c", "import pip"], text=False).returncode == 0:
            return [candidate, "-m", "pip"]
    return ["pip"]


@cache
def pip_index_config(python: str | None = None) -> PipIndexConfig:
    """Ask pip (of ``python``, default: see :func:`pip_command`) for its index configuration."""
    done = procs.run(
        [*pip_command(python), "config", "list"], env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return parse_config_list(done.stdout if done.returncode == 0 else "")
