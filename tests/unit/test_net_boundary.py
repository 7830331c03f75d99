"""The network boundary through the CLI: a misbehaving index on loopback, broken pages, bad URLs.

Every case: the exit code the table defines (2 a URL the user gave is not one, 3 the index
failed), one stderr line naming the URL or the option, no traceback, no hang (2 s network
deadlines here; a guard fails a case that runs past 60 s), and nothing written outside
jaxrel's cache (the WORKSPACE a pin would rewrite is unchanged).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from boundary_cli import run, tree_digests
from loopback_index import LoopbackIndex

from jaxrel.distributions import pipconfig
from jaxrel.distributions.index import Index, IndexClientError, IndexFile, Limits
from jaxrel.distributions.pages import PageError, parse_page
from jaxrel.distributions.urls import parse_url
from jaxrel.errors import BadInput
from jaxrel.release import publish

REPO = Path(__file__).resolve().parents[2]
SPLITFAM = REPO / "tests" / "data" / "splitfam"
JSON = "application/vnd.pypi.simple.v1+json"
SHA = "ab" * 32


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a WORKSPACE copy, a private cache and short network limits."""
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAXREL_NET_TIMEOUT", "1")
    monkeypatch.setenv("JAXREL_NET_DEADLINE", "2")
    monkeypatch.setenv("JAXREL_MAX_PAGE_MIB", "1")
    monkeypatch.delenv("JAXREL_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "WORKSPACE", tmp_path / "WORKSPACE")
    return tmp_path


def verbs(url: str, root: Path) -> dict[str, list[str]]:
    """The commands that read an index, each pointed at ``url``."""
    return {
        "xla-pin": ["xla", "pin", "--jaxlib", "0.12.0", "--workspace", str(root / "WORKSPACE"), "--index-url", url,
                    "--refresh"],
        "release-plan": ["release", "plan", "--project", str(SPLITFAM), "--index-url", url],
        "matrix": ["matrix", "--index-url", url, "--refresh"],
    }


BROKEN = {  # behaviour → what the one line says
    "trickle": "no complete answer within 2 s", "trickle-headers": "no complete answer within 2 s",
    "stall": "no answer for 1 s", "silent": "no answer for 1 s",
    "huge": "larger than 1 MiB", "huge-length": "larger than 1 MiB", "gzip_bomb": "larger than 1 MiB",
    "bad_status": "BadStatusLine", "not_http": "BadStatusLine", "broken_chunks": "IncompleteRead",
    "many_headers": "more than 100 headers", "long_header": "LineTooLong",
    "gzip_unlabelled": "without a Content-Encoding header", "gzip_json_unlabelled": "without a Content-Encoding",
    "error_500": "HTTP 500", "redirect_loop": "HTTP 302", "redirect_ftp": "ftp://",
}
VERBS = ("xla-pin", "release-plan", "matrix")


def _outside_cache(root: Path) -> dict[str, str]:
    return tree_digests(root, skip=root / "cache")


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("behaviour", sorted(BROKEN))
def test_a_misbehaving_index_is_exit_3_in_one_line(server: LoopbackIndex, sandbox: Path, behaviour: str, verb: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = server.url(behaviour)
    before = _outside_cache(sandbox)
    ran = run(verbs(url, sandbox)[verb], capsys)
    ran.one_line_error(3, url.rsplit("/simple/", 1)[0], BROKEN[behaviour])
    assert _outside_cache(sandbox) == before


@pytest.mark.parametrize("behaviour", ["trickle", "silent", "many_headers", "huge", "gzip_json_unlabelled"])
def test_release_check_on_a_misbehaving_index_is_exit_3_after_its_report(
        server: LoopbackIndex, sandbox: Path, behaviour: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = _outside_cache(sandbox) | tree_digests(SPLITFAM)
    ran = run(["release", "check", str(SPLITFAM), "--index-url", server.url(behaviour)], capsys)
    ran.one_line_error(3, "the checks are incomplete", server.url(behaviour), BROKEN[behaviour])
    assert "FAIL  version-unreleased" in ran.out
    assert _outside_cache(sandbox) | tree_digests(SPLITFAM) == before


@pytest.mark.parametrize("behaviour", ["trickle", "stall", "bad_status", "broken_chunks", "gzip_unlabelled"])
def test_compat_on_a_misbehaving_index_is_exit_3(server: LoopbackIndex, sandbox: Path, behaviour: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = _outside_cache(sandbox)
    run(["compat", "--index-url", server.url(behaviour), "--refresh"], capsys).one_line_error(3, BROKEN[behaviour])
    assert _outside_cache(sandbox) == before


def test_a_resolver_that_never_answers_is_exit_3_within_the_deadline(
        sandbox: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    import threading

    released = threading.Event()

    def stuck(*args: object, **kwargs: object) -> list[object]:
        released.wait(30)  # a DNS server that never answers
        return []

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    try:
        ran = run(["matrix", "--index-url", "http://index.invalid/simple/", "--refresh"], capsys)
    finally:
        released.set()
    ran.one_line_error(3, "http://index.invalid/simple/jax/", "no complete answer within 2 s")


PAGES: dict[str, tuple[str, bytes, str]] = {  # name → (content type, body, what the line says)
    "json-list": (JSON, b"[1, 2]", "the page should be a JSON object, found a JSON array"),
    "json-files-5": (JSON, b'{"files": 5}', "files should be a list, found a number"),
    "json-no-files": (JSON, b'{"meta": {"api-version": "1.0"}}', "files should be a list, found null"),
    "json-empty": (JSON, b"", "found an empty body"),
    "json-invalid": (JSON, b'{"files": [', "invalid JSON"),
    "json-deep": (JSON, b"[" * 100_000 + b"]" * 100_000, "nesting too deep"),
    "json-latin1": (JSON, '{"files": [], "name": "jäx"}'.encode("latin-1"), "text in UTF-8"),
    "json-api-2": (JSON, b'{"meta": {"api-version": "2.0"}, "files": []}', "meta.api-version should be 1.x"),
    "json-item-str": (JSON, b'{"files": ["@P@-0.1.0.tar.gz"]}', "files[0] should be an object, found a string"),
    "json-filename-int": (JSON, b'{"files": [{"filename": 5, "url": "x"}]}', "files[0].filename should be a file name"),
    "json-filename-path": (JSON, b'{"files": [{"filename": "../../@P@-0.1.0.tar.gz", "url": "x"}]}',
                           "should be one path component"),
    "json-sha-path": (JSON, json.dumps({"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "x",
                                                   "hashes": {"sha256": "../../../../escape"}}]}).encode(),
                      "files[0].hashes.sha256 should be a sha256 of 64 hex digits"),
    "json-sha-short": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "x", "hashes": {"sha256": "ab"}}]}',
                       "64 hex digits"),
    "json-hashes-list": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "x", "hashes": []}]}',
                         "files[0].hashes should be an object"),
    "json-requires-int": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "x", "requires-python": 3}]}',
                          "requires-python should be a string"),
    "json-yanked-int": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "x", "yanked": 1}]}',
                        "yanked should be true, false or a reason"),
    "json-url-file": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz", "url": "file:///etc/passwd"}]}',
                      "file:// is not supported"),
    "json-url-none": (JSON, b'{"files": [{"filename": "@P@-0.1.0.tar.gz"}]}', "files[0].url should be a URL"),
    "json-other-name": (JSON, b'{"name": "torch", "files": []}', "name should be the project"),
    "html-text": ("text/html", b"hello, this is not an index", "should be a PEP 503 page (markup)"),
    "html-sha-path": ("text/html", b'<a href="/f/@P@-0.1.0.tar.gz#sha256=../../../x">x</a>',
                      "#sha256 should be a sha256 of 64 hex digits"),
    "html-empty": ("text/html", b"  \n", "found an empty body"),
    "html-binary": ("text/html", b"\x00\xff\xfe<a>", "text in UTF-8"),
    "octet-stream": ("application/octet-stream", b"\x1f\x8b\x08", "Content-Type should be PEP 691 JSON or PEP 503"),
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_broken_page_is_exit_3_naming_the_field(server: LoopbackIndex, sandbox: Path, page: str, verb: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    kind, body, says = PAGES[page]
    url = server.serve_page(page, kind, body)
    before = _outside_cache(sandbox)
    ran = run(verbs(url, sandbox)[verb], capsys)
    ran.one_line_error(3, url.rsplit("/simple/", 1)[0], says)
    assert _outside_cache(sandbox) == before


def test_a_sha256_path_from_the_index_never_becomes_a_directory(server: LoopbackIndex, sandbox: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The old client made ``cache/files/../../../../escape/`` from this answer and wrote outside its cache."""
    page = {"files": [{"filename": "jax-0.1.0.tar.gz", "url": "/files/jax-0.1.0.tar.gz",
                       "hashes": {"sha256": "../../../../escape"}}]}
    url = server.serve_page("sha-escape", JSON, json.dumps(page).encode())
    ran = run(["matrix", "--index-url", url, "--refresh"], capsys)
    ran.one_line_error(3, "hashes.sha256")
    assert not (sandbox / "escape").exists() and not (sandbox.parent / "escape").exists()
    assert not (sandbox / "cache" / "files").exists()
    forged = IndexFile("jax-0.1.0.tar.gz", url + "jax-0.1.0.tar.gz", url, sha256="../../../../escape")
    with pytest.raises(IndexClientError, match="should be a sha256 of 64 hex digits"):
        Index([url], cache=sandbox / "cache").download(forged)
    assert not (sandbox / "cache" / "files").exists()


def test_a_good_json_page_through_the_server_is_typed(server: LoopbackIndex, sandbox: Path) -> None:
    page = {"meta": {"api-version": "1.1"}, "name": "demo", "files": [
        {"filename": "demo-1.0-py3-none-any.whl", "url": "/f/demo.whl", "hashes": {"sha256": SHA.upper()},
         "size": 10, "requires-python": ">=3.11"},
        {"filename": "other-1.0.tar.gz", "url": "/f/other.tar.gz"},  # another project's file: skipped
        {"filename": "README.txt", "url": "/f/README.txt"}]}  # not a distribution: skipped
    url = server.serve_page("good", JSON, json.dumps(page).encode())
    listing = Index([url], cache=sandbox / "cache").listing("Demo")
    (file,) = listing.files
    assert file.sha256 == SHA and file.size == 10 and file.url.endswith("/f/demo.whl")
    assert file.url.startswith(f"http://127.0.0.1:{server.port}/")


def test_a_download_larger_than_the_listed_size_is_cut_off(server: LoopbackIndex, sandbox: Path) -> None:
    file = IndexFile("jax-0.1.0.tar.gz", server.url("huge") + "jax-0.1.0.tar.gz", server.url("huge"), sha256=SHA,
                     size=1000)
    with pytest.raises(IndexClientError, match="huge/simple/jax-0.1.0.tar.gz: the answer is larger than 1000 bytes"):
        Index([server.url("huge")], cache=sandbox / "cache").download(file)
    leftovers = [p for p in (sandbox / "cache").rglob("*") if p.is_file()]
    assert leftovers == [], leftovers  # the partial download is removed


@pytest.mark.parametrize("behaviour", ["trickle", "stall", "huge"])
def test_publish_lists_a_misbehaving_index_as_exit_3(server: LoopbackIndex, sandbox: Path, behaviour: str) -> None:
    artifact = publish.Artifact("x-1.0-py3-none-any.whl", "x", "1.0", "frontend", "wheel", "0" * 64, 1)
    repository = publish.resolve_repository(None, "http://127.0.0.1:9/", server.url(behaviour))
    with pytest.raises(publish.PublishError, match=f"cannot list x on .*{behaviour}.*nothing was uploaded") as failed:
        publish.index_hashes(repository, [artifact])
    assert failed.value.exit_code == 3


BAD_URLS = {
    "": "it is empty", "index.example/simple": "no scheme", "http://": "no host", "ftp://h/simple/": "ftp://",
    "javascript:alert(1)": "no scheme", "http://h:99999/": "port", "http://h:abc/": "port", "http://h:0/": "port",
    "http://h /simple/": "spaces or control characters", "http://h/simple/\r\nX-Injected: 1": "control characters",
    "http://[::1/": "IPv6", "http://[zz::1]/": "IPv6", "http://h..x/": "host name", "file://server/share/": "file://",
}


@pytest.mark.parametrize("text", sorted(BAD_URLS))
def test_bad_urls_are_bad_input_naming_where_they_came_from(text: str) -> None:
    with pytest.raises(BadInput) as failed:
        parse_url(text, "--index-url")
    message = str(failed.value)
    assert message.startswith("--index-url: ") and BAD_URLS[text] in message and "\n" not in message


@pytest.mark.parametrize("text", ["http://127.0.0.1:8080/simple/", "https://u:p%40ss@index.example/simple",
                                  "http://[::1]:8080/simple/", "file:///srv/simple/", "HTTPS://Index.Example/"])
def test_good_urls_parse(text: str) -> None:
    url = parse_url(text, "--index-url")
    assert url.text == text and url.scheme in ("http", "https", "file")


@pytest.mark.parametrize("text", ["index.example/simple", "http://h:99999/", "http://h /x", "http://[zz::1]/"])
@pytest.mark.parametrize("verb", VERBS)
def test_a_bad_index_url_option_is_exit_2(sandbox: Path, text: str, verb: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = _outside_cache(sandbox)
    run(verbs(text, sandbox)[verb], capsys).one_line_error(2, "--index-url")
    assert _outside_cache(sandbox) == before


@pytest.mark.parametrize("variable", ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"])
def test_a_bad_url_in_pips_configuration_is_exit_2_naming_it(sandbox: Path, variable: str,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv(variable, "http://127.0.0.1:99999/simple/")
    pipconfig.pip_index_config.cache_clear()
    try:
        ran = run(["matrix", "--refresh"], capsys)
    finally:
        pipconfig.pip_index_config.cache_clear()
    ran.one_line_error(2, f"{variable} (pip's configuration)", "port")


def test_a_bad_url_in_a_pip_configuration_file_names_the_section() -> None:
    with pytest.raises(BadInput, match=r"^install.index-url in pip's configuration \(pip config list\): "
                                       r"'https://h:0/simple' is not a usable URL \(its port"):
        pipconfig.parse_config_list("global.index-url='https://ok.example/simple'\n"
                                    "install.index-url='https://h:0/simple'\n")


@pytest.mark.parametrize("value", ["http://h /", "ftp://h/", "h:1/upload"])
def test_a_bad_repository_url_is_exit_2(value: str) -> None:
    with pytest.raises(BadInput, match="--repository-url: .* is not a usable URL"):
        publish.resolve_repository(None, value, None)


@pytest.mark.parametrize(("variable", "value"), [("JAXREL_NET_TIMEOUT", "soon"), ("JAXREL_NET_DEADLINE", "-1"),
                                                 ("JAXREL_MAX_PAGE_MIB", "1.5"), ("JAXREL_NET_DEADLINE", "inf")])
def test_limits_from_the_environment_are_checked(sandbox: Path, variable: str, value: str,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(variable, value)
    run(["matrix", "--index-url", "http://127.0.0.1:9/simple/", "--refresh"], capsys).one_line_error(2, variable)


def test_limits_defaults_and_overrides() -> None:
    assert Limits.from_env({}) == Limits(30.0, 120.0, 1800.0, 64 << 20, 8192 << 20)
    assert Limits.from_env({"JAXREL_NET_DEADLINE": "5", "JAXREL_MAX_PAGE_MIB": "2"}).deadline == 5.0
    assert Limits.from_env({"JAXREL_MAX_PAGE_MIB": "2"}).max_page == 2 << 20


def test_a_fifo_as_a_file_index_page_is_refused_without_waiting(sandbox: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import os

    page = sandbox / "index" / "simple" / "jax"
    page.mkdir(parents=True)
    os.mkfifo(page / "index.html")
    url = (sandbox / "index" / "simple").as_uri()
    run(["matrix", "--index-url", url, "--refresh"], capsys).one_line_error(3, "not a regular file")


def test_a_damaged_cache_entry_is_a_miss(server: LoopbackIndex, sandbox: Path) -> None:
    page = {"files": [{"filename": "demo-1.0.tar.gz", "url": "/f/demo-1.0.tar.gz", "hashes": {"sha256": SHA}}]}
    url = server.serve_page("cached", JSON, json.dumps(page).encode())
    index = Index([url], cache=sandbox / "cache")
    assert [f.sha256 for f in index.listing("demo").files] == [SHA]
    (entry,) = (sandbox / "cache" / "listings").rglob("demo.json")
    record = json.loads(entry.read_text())
    record["files"][0]["sha256"] = "../../escape"
    entry.write_text(json.dumps(record))
    assert [f.sha256 for f in Index([url], cache=sandbox / "cache").listing("demo").files] == [SHA]  # fetched again
    entry.write_text("[" * 100_000)
    assert [f.sha256 for f in Index([url], cache=sandbox / "cache").listing("demo").files] == [SHA]


def test_parse_page_directly() -> None:
    body = b'<!DOCTYPE html><a href="../../f/jax-0.1.0.tar.gz#sha256=' + SHA.encode() + b'" data-yanked="">x</a>'
    (file,) = parse_page(body, "text/html", None, "https://i.example/simple/jax/", "i", "jax")
    assert (file.url, file.sha256, file.yanked) == ("https://i.example/f/jax-0.1.0.tar.gz", SHA, "")
    with pytest.raises(PageError, match="link 1 .* file name should be one path component"):
        parse_page(b'<a href="/f/..%2F..%2Fjax-0.1.0.tar.gz">x</a>', "text/html", None, "https://i/simple/jax/", "i",
                   "jax")


def test_a_broken_answer_after_a_good_one_falls_back_to_the_cached_listing_saying_why(server: LoopbackIndex,
                                                                                      sandbox: Path) -> None:
    page = {"files": [{"filename": "demo-1.0.tar.gz", "url": "/f/demo-1.0.tar.gz", "hashes": {"sha256": SHA}}]}
    url = server.serve_page("flaky", JSON, json.dumps(page).encode())
    assert len(Index([url], cache=sandbox / "cache").listing("demo").files) == 1
    server.pages["flaky"] = (JSON, b'{"files": 5}')
    said: list[str] = []
    files = Index([url], cache=sandbox / "cache", refresh=True, progress=said.append).listing("demo").files
    assert [f.sha256 for f in files] == [SHA]
    assert said == [f"warning: {url}demo/: files should be a list, found a number; using the listing cached 0 min ago"]
