"""Generative fuzz of the index client's own boundaries: pip's configuration as ``pip config list`` prints it, URLs
holding passwords, remote METADATA (mutated wheels over HTTP range reads, PEP 658 files) and the METADATA cache.

The property for every example: the answer is right or the error is one of jaxrel's (exit 2 or 3) on one
line, and no secret planted in the input appears in any message. CI runs a bounded count; ``nox -s fuzz``
runs far more (the ``fuzz`` hypothesis profile).
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simple_index import Behaviour, SimpleIndexServer, make_wheel
from test_fuzz_net_archive import fuzz

from jaxrel._util.text import redact
from jaxrel.distributions import pipconfig
from jaxrel.distributions.pages import IndexFile
from jaxrel.distributions.remote_metadata import MetadataReader, read_wheel_metadata
from jaxrel.distributions.transport import Limits
from jaxrel.distributions.urls import parse_url
from jaxrel.errors import JaxrelError

SECRET = "fuzzSecret9Qx"
KEYS = ["index-url", "extra-index-url", "find-links", "no-index", "cert", "trusted-host", "pypi-url", "timeout",
        "index_url", "INDEX-URL", "--index-url", "client-cert", ""]
SECTIONS = ["global", "install", "download", ":env:", "freeze", "a=b", ""]
VALUES = [f"https://user:{SECRET}@i.example/simple/", "http://127.0.0.1:9/a/simple\nhttp://127.0.0.1:9/b/simple",
          "team's \"q\"", "yes", "maybe", "", "~/ca.pem", "http://[::1", "file:///x", "\x00", "a" * 300,
          f"http://u:pa/{SECRET}@h/simple", f"http://u:pa {SECRET}@h/simple", "1", "off"]


@st.composite
def config_lines(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["pip", "pip", "pip", "garbage"]))
        if kind == "garbage":
            lines.append(draw(st.sampled_from(["garbage", "x='", "global.index-url=unquoted", "=''", "'a'='b'",
                                               ".='x'"]) | st.text(max_size=20)))
            continue
        value = draw(st.sampled_from(VALUES) | st.text(max_size=12))
        lines.append(f"{draw(st.sampled_from(SECTIONS))}.{draw(st.sampled_from(KEYS))}={value!r}")
    return "\n".join(lines) + "\n"


@fuzz(200)
@given(text=config_lines())
def test_fuzzed_pip_config_lists_decode_or_refuse_without_a_secret(text: str) -> None:
    try:
        config = pipconfig.parse_config_list(text, environ={})
    except JaxrelError as error:
        message = redact(str(error))
        assert error.exit_code in (2, 3) and "\n" not in message and SECRET not in message
        return
    for url in ([config.index_url] if config.index_url else []) + list(config.extra_index_urls):
        assert parse_url(url, "check").text == url  # every URL that came through is usable
    assert isinstance(config.no_index, bool) and all(isinstance(link, str) for link in config.find_links)


PASSWORDS = st.sampled_from([SECRET, f"a/{SECRET}", f"a@{SECRET}", f"a {SECRET}", f"{SECRET}:x", f"%2F{SECRET}",
                             f"{SECRET}\r\n", f"a#{SECRET}", f"a?{SECRET}"])


@fuzz(300)
@given(scheme=st.sampled_from(["http://", "https://", "ftp://", "", "http:/"]), user=st.sampled_from(["u", "", "u:"]),
       password=PASSWORDS, host=st.sampled_from(["h", "127.0.0.1:9", "[::1]", "h:99999", "", "h/x"]),
       path=st.sampled_from(["/simple/", "", "/a b/", "/@x"]))
def test_fuzzed_urls_with_passwords_never_print_them(scheme: str, user: str, password: str, host: str,
                                                     path: str) -> None:
    text = f"{scheme}{user}:{password}@{host}{path}"
    try:
        parse_url(text, "--index-url")
    except JaxrelError as error:
        message = redact(str(error))
        assert error.exit_code == 2 and "\n" not in message
        assert SECRET not in message, message


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimpleIndexServer, Path]]:
    root = tmp_path_factory.mktemp("fuzz-index")
    with SimpleIndexServer() as server:
        server.add("ranges", Behaviour(), probe=[])
        server.add("whole", Behaviour(ranges=False), probe=[])
        server.add("pep658", Behaviour(pep658=True), probe=[])
        yield server, root


def _mutated(draw: st.DrawFn, padding: int) -> bytes:
    with tempfile.TemporaryDirectory(prefix="jaxrel-fuzz-") as folder:  # removed with the wheel: 40 a run were left
        data = bytearray(make_wheel(Path(folder), "probe", "1.0", ("numpy>=2",), padding=padding).read_bytes())
    how = draw(st.sampled_from(["flip", "truncate", "flip", "none"]))
    if how == "flip":
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
    elif how == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


@fuzz(40)
@given(data=st.data())
def test_fuzzed_remote_wheels_give_metadata_or_one_error(served: tuple[SimpleIndexServer, Path],
                                                         data: st.DataObject) -> None:
    server, root = served
    mode = data.draw(st.sampled_from(["ranges", "whole", "pep658"]))
    wheel_bytes = _mutated(data.draw, data.draw(st.sampled_from([0, 600_000])))
    folder = Path(tempfile.mkdtemp(dir=root))
    path = folder / "probe-1.0-py3-none-any.whl"
    path.write_bytes(wheel_bytes)
    server.indexes[mode].projects["probe"] = [path]
    metadata_digest = None
    if mode == "pep658":
        try:
            with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as archive:
                metadata_digest = hashlib.sha256(archive.read("probe-1.0.dist-info/METADATA")).hexdigest()
        except Exception:  # noqa: BLE001 - a mutation broke the zip: the server serves no .metadata then
            server.indexes[mode].projects["probe"] = []
    file = IndexFile(path.name, f"{server.origin}/{mode}/files/{path.name}", server.url(mode),
                     sha256=data.draw(st.sampled_from([None, hashlib.sha256(wheel_bytes).hexdigest()])),
                     size=data.draw(st.sampled_from([None, len(wheel_bytes), len(wheel_bytes) + 7])),
                     metadata=mode == "pep658", metadata_sha256=metadata_digest)
    reader = MetadataReader(limits=Limits(connect=5, deadline=20, retries=0), cache=folder / "cache")
    try:
        metadata = reader.metadata(file)
    except JaxrelError as error:
        assert error.exit_code in (2, 3) and "\n" not in str(error)
        return
    assert metadata.name == "probe" and metadata.version == "1.0"


@fuzz(60)
@given(entry=st.binary(max_size=300) | st.sampled_from([b"Name: probe\nVersion: 1.0\n", b"Name: torch\nVersion: 1\n",
                                                       b"\xff\xfe", b"Name: probe\nVersion: 1.0\n" + b"x" * 70_000]),
       kind=st.sampled_from(["file", "dir", "symlink", "fifo"]))
def test_fuzzed_cache_entries_are_hints(served: tuple[SimpleIndexServer, Path], entry: bytes, kind: str) -> None:
    server, root = served
    folder = Path(tempfile.mkdtemp(dir=root))
    wheel = make_wheel(folder, "probe", "1.0", ("numpy>=2",))
    server.indexes["ranges"].projects["probe"] = [wheel]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    cache = folder / "cache"
    cache.mkdir()
    target = cache / f"{digest}.metadata"
    outside = folder / "outside"
    outside.write_bytes(entry)
    if kind == "file":
        target.write_bytes(entry)
    elif kind == "dir":
        target.mkdir()
    elif kind == "symlink":
        target.symlink_to(outside)
    else:
        os.mkfifo(target)
    file = IndexFile(wheel.name, f"{server.origin}/ranges/files/{wheel.name}", server.url("ranges"), sha256=digest)
    metadata = MetadataReader(limits=Limits(connect=5, deadline=20), cache=cache).metadata(file)
    truth = read_wheel_metadata(io.BytesIO(wheel.read_bytes()), wheel.name)
    assert b"numpy>=2" in truth and metadata.requires_dist == ("numpy>=2",)
    assert outside.read_bytes() == entry  # never written through a planted link
