"""Generative fuzz of the network and archive boundaries (hypothesis), through the CLI in process.

Mutated PEP 691 JSON and PEP 503 HTML pages are served from a loopback index to ``xla pin``,
``release plan`` and ``matrix``; mutated METADATA, RECORD and WHEEL members of a small wheel (and
PKG-INFO of an sdist) are handed to ``matrix --wheelhouse``; random text is parsed as a URL. The
property for every example: the exit code is 0, 1, 2 or 3 (never 70), no traceback, an error is one
line, the command ends (a guard fails it after 60 s; network deadlines are 2 s) and no file outside
jaxrel's cache changes. CI runs a bounded number of examples per test; ``nox -s fuzz`` loads the
``fuzz`` hypothesis profile (registered in tests/conftest.py) and runs far more.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import archive_kit as kit
import pytest
from boundary_cli import run, tree_digests
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from loopback_index import LoopbackIndex

from jaxrel.distributions.urls import parse_url
from jaxrel.errors import JaxrelError

REPO = Path(__file__).resolve().parents[2]
SPLITFAM = REPO / "tests" / "data" / "splitfam"
JSON = "application/vnd.pypi.simple.v1+json"
CI_EXAMPLES = 40


def examples(ci: int = CI_EXAMPLES) -> int:
    """``ci`` examples, or the loaded profile's count when a larger profile (``fuzz``) is loaded."""
    loaded = settings.default.max_examples
    return loaded if loaded > 100 else ci


def fuzz(ci: int = CI_EXAMPLES) -> Any:
    return settings(max_examples=examples(ci), deadline=None, derandomize=examples(ci) == ci,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXREL_NET_TIMEOUT", "1")
    monkeypatch.setenv("JAXREL_NET_DEADLINE", "2")
    monkeypatch.setenv("JAXREL_MAX_PAGE_MIB", "1")
    monkeypatch.setenv("JAXREL_DOWNLOAD_DEADLINE", "2")
    monkeypatch.delenv("JAXREL_DEBUG", raising=False)


def check(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run ``argv`` with its cache under ``root``; assert the property; the exit code."""
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(root / "cache"))
    before = tree_digests(root, skip=root / "cache")
    ran = run(argv, capsys)
    assert ran.code in (0, 1, 2, 3), f"{argv}: exit {ran.code}: {ran.err[-600:]}"
    assert "Traceback" not in ran.err and "internal error" not in ran.err, ran.err[-600:]
    if ran.code in (2, 3):
        assert len(ran.error_lines) == 1, f"{argv}: stderr is not one line: {ran.err[-600:]}"
    assert tree_digests(root, skip=root / "cache") == before, f"{argv}: a file outside the cache changed"
    event(f"exit {ran.code}: {(ran.error_lines or [''])[0].split(': error: ')[-1].split(' ')[1:4]}"
          if ran.code in (2, 3) else f"exit {ran.code}")
    return ran.code


# -- index pages -----------------------------------------------------------------------------------------------

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=False),
                      st.text(max_size=40), st.sampled_from(["../../../../escape", "ab" * 32, "AB" * 32, "", "/",
                                                             "file:///etc/passwd", "javascript:x", "1.0", "2.0"]))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10), inner, max_size=4), max_leaves=12)
filenames = st.sampled_from(["@P@-0.12.0-py3-none-any.whl", "@P@-0.12.0-cp311-cp311-manylinux2014_x86_64.whl",
                             "@P@-0.12.0.tar.gz", "@P@-0.1.0.tar.gz", "../@P@-0.1.0.tar.gz", "@P@-banana.tar.gz",
                             "other-1.0.tar.gz", "@P@-0." + "9" * 5000 + ".tar.gz", "@P@\\x-1.0.tar.gz", ""]) | st.text(
    max_size=30)


@st.composite
def json_pages(draw: st.DrawFn) -> bytes:
    files = []
    for _ in range(draw(st.integers(0, 3))):
        item: dict[str, Any] = {"filename": draw(filenames), "url": draw(st.sampled_from(
            ["/files/x.whl", "x.tar.gz", "http://127.0.0.1:9/x", "file:///etc/passwd", "", "//h:99999/x"]))}
        item["hashes"] = {"sha256": draw(st.sampled_from(["ab" * 32, "../../../../escape", "AB" * 32, "zz"]))}
        for key in draw(st.sets(st.sampled_from(["requires-python", "yanked", "size", "hashes", "url", "filename",
                                                 "core-metadata", "dist-info-metadata"]), max_size=3)):
            item[key] = draw(json_value)
        files.append(item)
    page: Any = {"meta": {"api-version": draw(st.sampled_from(["1.0", "1.1", "2.0", "1"]))}, "name": "@P@",
                 "files": files}
    for key in draw(st.sets(st.sampled_from(["meta", "name", "files"]), max_size=2)):
        page[key] = draw(json_value)
    if draw(st.integers(0, 9)) == 0:
        page = draw(json_value)
    if draw(st.integers(0, 19)) == 0:
        return b"[" * draw(st.integers(1, 200_000))
    return json.dumps(page).encode()


@st.composite
def html_pages(draw: st.DrawFn) -> bytes:
    links = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(filenames)
        fragment = draw(st.sampled_from(["", "#sha256=" + "ab" * 32, "#sha256=../../x", "#md5=00", "#sha256="]))
        attrs = draw(st.sampled_from(["", ' data-yanked=""', ' data-requires-python="&gt;=3.11"',
                                      ' data-requires-python="&gt;&gt;3"']))
        links.append(f'<a href="/files/{name}{fragment}"{attrs}>{name}</a>')
    text = "<!DOCTYPE html><html><body>" + "".join(links) + draw(st.text(max_size=30)) + "</body></html>"
    return text.encode("utf-8", "surrogatepass")


def mutated(body: bytes, draw: st.DrawFn) -> bytes:
    """``body`` with bytes flipped, cut, inserted, or all of it gzipped (no Content-Encoding)."""
    action = draw(st.sampled_from(["keep", "keep", "flip", "cut", "insert", "gzip"]))
    if action == "flip" and body:
        at = draw(st.integers(0, len(body) - 1))
        return body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1:]
    if action == "cut":
        return body[: draw(st.integers(0, len(body)))]
    if action == "insert":
        at = draw(st.integers(0, len(body)))
        return body[:at] + draw(st.binary(max_size=8)) + body[at:]
    if action == "gzip":
        return gzip.compress(body)
    return body


@st.composite
def pages(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from([JSON, JSON, JSON, "text/html", "text/html", "text/html", "application/octet-stream",
                                 "text/plain"]))
    body = draw(json_pages()) if "json" in kind or draw(st.booleans()) else draw(html_pages())
    return kind, mutated(body, draw)


VERBS = ("xla-pin", "release-plan", "matrix")


def verb_argv(verb: str, url: str, root: Path) -> list[str]:
    return {
        "xla-pin": ["xla", "pin", "--jaxlib", "0.12.0", "--workspace", str(root / "WORKSPACE"), "--index-url", url,
                    "--refresh"],
        "release-plan": ["release", "plan", "--project", str(SPLITFAM), "--index-url", url],
        "matrix": ["matrix", "--index-url", url, "--refresh"],
    }[verb]


@fuzz()
@given(page=pages(), verb=st.sampled_from(VERBS))
def test_fuzzed_index_pages(server: LoopbackIndex, limits: None, page: tuple[str, bytes], verb: str,
                            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    kind, body = page
    key = f"fuzz{len(server.pages)}"
    url = server.serve_page(key, kind, body)
    with tempfile.TemporaryDirectory(prefix="jaxrel-fuzz-") as folder:
        root = Path(folder)
        shutil.copy(REPO / "WORKSPACE", root / "WORKSPACE")
        monkeypatch.chdir(root)
        check(verb_argv(verb, url, root), root, capsys, monkeypatch)
    del server.pages[key]


# -- archives -------------------------------------------------------------------------------------------------


def mutate_text(base: bytes, draw: st.DrawFn) -> bytes:
    lines = base.split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["replace", "add", "drop", "bytes"]))
        at = draw(st.integers(0, len(lines)))
        if action == "replace" and lines:
            lines[min(at, len(lines) - 1)] = draw(st.binary(max_size=40))
        elif action == "add":
            field = draw(st.sampled_from([b"Name", b"Version", b"Requires-Dist", b"Requires-Python", b"Tag",
                                          b"Metadata-Version", b"Dynamic", b"License-File", b"Provides-Extra"]))
            value = draw(st.sampled_from([b"banana", b"???", b">>3", b"py3-none", b"0." + b"9" * 5000, b"",
                                          b"numpy; extra == 'x' and", b"\xff\xfe", b"x" * 200_000])) if draw(
                st.booleans()) else draw(st.binary(max_size=20))
            lines.insert(at, field + b": " + value)
        elif action == "drop" and lines:
            del lines[min(at, len(lines) - 1)]
        else:
            lines.insert(at, draw(st.binary(max_size=30)))
    return b"\n".join(lines)


@st.composite
def wheels(draw: st.DrawFn) -> bytes:
    target = draw(st.sampled_from(["metadata", "wheel", "record", "zip"]))
    if target == "metadata":
        return kit.wheel_bytes(metadata=mutate_text(kit.METADATA, draw))
    if target == "wheel":
        return kit.wheel_bytes(wheel=mutate_text(kit.WHEEL, draw))
    if target == "record":
        good = kit.record_of({"jax/__init__.py": b"x = 1\n"})
        record = draw(st.sampled_from([good, good.replace(b"sha256=", b"md5="), good.replace(b"sha256=", b"sha256;x="),
                                       b'a,"' + b"y" * 140_000 + b'",1\n', b"\xff"]))
        return kit.wheel_bytes(record=mutate_text(record, draw) if draw(st.booleans()) else record)
    data = bytearray(kit.wheel_bytes())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
    return bytes(data)


@fuzz()
@given(wheel=wheels())
def test_fuzzed_wheels(wheel: bytes, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory(prefix="jaxrel-fuzz-") as folder:
        root = Path(folder)
        (root / "index" / "simple").mkdir(parents=True)
        monkeypatch.chdir(root)
        path = kit.write(root / "house", kit.FILENAME, wheel)
        check(["matrix", "--frontend", "jax==0.9.9", "--wheelhouse", str(path.parent), "--index-url",
               (root / "index" / "simple").as_uri()], root, capsys, monkeypatch)


@fuzz(20)
@given(data=st.data())
def test_fuzzed_sdists(data: st.DataObject, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    mutated_info = mutate_text(kit.METADATA, data.draw)
    with tempfile.TemporaryDirectory(prefix="jaxrel-fuzz-") as folder:
        root = Path(folder)
        (root / "index" / "simple").mkdir(parents=True)
        monkeypatch.chdir(root)
        path = kit.write(root / "house", "jax-0.9.9.tar.gz", kit.sdist_bytes(mutated_info))
        check(["matrix", "--wheelhouse", str(path.parent), "--index-url", (root / "index" / "simple").as_uri()],
              root, capsys, monkeypatch)


# -- URLs -------------------------------------------------------------------------------------------------------

url_parts = st.sampled_from(["http://", "https://", "file://", "ftp://", "", "http:/", "HTTP://", "http://[",
                             "127.0.0.1", ":8080", ":99999", ":-1", "[::1]", "]", "/simple/", " ", "\r\n", "\t",
                             "@", "u:p@", "%", "#frag", "?q=1", "..", "\x00", "é", "[zz::1]"])


@fuzz(300)
@given(parts=st.lists(url_parts | st.text(max_size=6), max_size=8))
def test_fuzzed_urls_parse_or_name_the_origin(parts: list[str]) -> None:
    text = "".join(parts)
    try:
        url = parse_url(text, "--index-url")
    except JaxrelError as error:
        message = str(error)
        assert error.exit_code == 2 and message.startswith("--index-url: ") and "\n" not in message
        return
    assert url.text == text and url.scheme in ("http", "https", "file")
    assert not any(c.isspace() for c in text) and (url.is_file or url.host)
