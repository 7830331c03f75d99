"""Hostile indexes, URLs, wheels and caches: one line each, exit 2 or 3, nothing secret printed, nothing followed
that should not be."""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile
from pathlib import Path

import pytest
from boundary_cli import run
from simple_index import Behaviour, SimpleIndexServer, make_wheel

from jaxrel.distributions.index import Index
from jaxrel.distributions.pages import IndexFile, parse_html, parse_json
from jaxrel.distributions.remote_metadata import MetadataReader, RemoteMetadataError, read_wheel_metadata
from jaxrel.distributions.transport import Limits
from jaxrel.errors import BadInput, JaxrelError

PASSWORD = "s3cr3t-Pa55"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAXREL_NET_TIMEOUT", "5")
    monkeypatch.setenv("JAXREL_NET_DEADLINE", "20")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("password", ["pa ss" + PASSWORD, "pa/ss" + PASSWORD, "p@ss" + PASSWORD])
@pytest.mark.parametrize("where", ["--index-url", "PIP_INDEX_URL", "pip.conf"])
def test_a_password_that_breaks_the_url_is_never_printed(password: str, where: str, sandbox: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrel.distributions import pipconfig

    url = f"http://user:{password}@127.0.0.1:9/simple/"
    args = ["matrix", "--refresh"]
    if where == "--index-url":
        args += ["--index-url", url]
    elif where == "PIP_INDEX_URL":
        monkeypatch.setenv("PIP_INDEX_URL", url)
    else:
        for variable in [v for v in os.environ if v.startswith("PIP_")]:
            monkeypatch.delenv(variable)
        (sandbox / "pip.conf").write_text(f"[install]\nindex-url = {url}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(sandbox / "pip.conf"))
    pipconfig.pip_index_config.cache_clear()
    try:
        ran = run(args, capsys)
    finally:
        pipconfig.pip_index_config.cache_clear()
    assert ran.code in (2, 3)
    everything = ran.out + ran.err
    assert PASSWORD not in everything and "pa ss" not in everything and "pa/ss" not in everything
    assert len(ran.error_lines) == 1


def test_an_index_echoing_the_credentials_gets_none_of_them_printed(sandbox: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import base64

    with SimpleIndexServer() as served:
        served.add("echo", Behaviour(echo=True), jax=[])
        url = served.url("echo").replace("://", f"://user:{PASSWORD}@")
        ran = run(["matrix", "--index-url", url, "--refresh"], capsys)
        assert any(r.headers.get("Authorization") for r in served.requests)  # it was sent, and echoed back
    token = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    line = ran.one_line_error(3, "HTTP 401 Unauthorized")
    assert PASSWORD not in ran.out + ran.err and token not in ran.out + ran.err and "you sent" not in line


@pytest.mark.parametrize("same_origin", [True, False])
def test_credentials_never_follow_a_redirect_off_their_origin(same_origin: bool, tmp_path: Path) -> None:
    """A file URL that redirects: to the same origin the credentials go along (pip's rule); to another origin
    they are dropped, and the download still succeeds there (verified by its sha256)."""
    wheel = make_wheel(tmp_path / "w", "probe", "1.0")
    with SimpleIndexServer() as index, SimpleIndexServer() as elsewhere:
        target = index if same_origin else elsewhere
        target.add("target", probe=[wheel])
        index.add("moved", Behaviour(redirect_to=f"{target.origin}/target"), probe=[wheel])
        url = index.url("moved").replace("://", f"://user:{PASSWORD}@")
        client = Index([url], cache=tmp_path / "cache", refresh=True)
        path = client.download(client.listing("probe").files[0])
        assert path.read_bytes() == wheel.read_bytes()
        asked = [r for r in index.requests if r.path.startswith("/moved/files/")]
        landed = [r for r in target.requests if r.path.startswith("/target/files/")]
        assert asked and "Authorization" in asked[0].headers  # the index's own origin gets them
        assert landed and all(("Authorization" in r.headers) == same_origin for r in landed)


def test_a_fifo_as_the_ca_bundle_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            Index(["https://127.0.0.1:9/simple/"], cache=tmp_path / "cache", refresh=True,
                  cafile=str(fifo)).listing("probe")
        except BaseException as error:  # noqa: BLE001 - the test inspects it
            outcome.append(error)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock the reader so the thread ends, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("a FIFO named as the CA bundle was waited on")
    assert isinstance(outcome[0], BadInput) and "not a regular file" in str(outcome[0])


def _zip_with_metadata(data: bytes, *, compress: bool = True) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        archive.writestr("probe-1.0.dist-info/METADATA", data)
        archive.writestr("probe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


def test_a_metadata_bomb_is_refused_not_inflated() -> None:
    bomb = _zip_with_metadata(b"Name: probe\n" + b"\0" * (64 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(RemoteMetadataError, match="more than the 4 MiB"):
        read_wheel_metadata(io.BytesIO(bomb), "bomb.whl")


def test_a_bomb_that_lies_about_its_size_is_cut_off() -> None:
    data = bytearray(_zip_with_metadata(b"Name: probe\n" + b"\0" * (64 << 20)))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size: local, central
        at = data.find(signature)
        while at >= 0:
            data[at + offset:at + offset + 4] = struct.pack("<I", 100)
            at = data.find(signature, at + 4)
    with pytest.raises(RemoteMetadataError):
        read_wheel_metadata(io.BytesIO(bytes(data)), "liar.whl")


def _zip64(cut: int | None) -> bytes:
    """A small zip whose end record defers to a zip64 end record (as a wheel over 4 GiB or 65535 files does), that
    record cut to ``cut`` bytes (``None``: whole)."""
    data = _zip_with_metadata(b"Metadata-Version: 2.1\nName: probe\nVersion: 1.0\n")
    end = data.rfind(b"PK\x05\x06")
    entries, size, offset = struct.unpack("<HII", data[end + 10:end + 20])
    record = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1)
    tail = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    kept = record if cut is None else record[:cut]
    return data[:end] + kept + locator + tail


def test_a_whole_zip64_record_reads() -> None:
    assert b"Name: probe" in read_wheel_metadata(io.BytesIO(_zip64(None)), "whole.whl")


@pytest.mark.parametrize("cut", [0, 1, 10, 30, 55])
def test_a_zip64_record_cut_short_is_one_error(cut: int) -> None:
    with pytest.raises(RemoteMetadataError, match="not a readable wheel|expected one"):
        read_wheel_metadata(io.BytesIO(_zip64(cut)), "cut.whl")


def test_metadata_of_tens_of_mb_from_the_index_is_refused_within_the_cap(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "probe", "1.0")
    with SimpleIndexServer() as served:
        served.add("idx", Behaviour(pep658=True), probe=[wheel])
        file = Index([served.url("idx")], cache=tmp_path / "cache", refresh=True).listing("probe").files[0]
        assert file.metadata
        served.indexes["idx"].projects["probe"] = [make_wheel(tmp_path / "big", "probe", "1.0",
                                                              tuple(f"dep{i}>=1" for i in range(400_000)))]
        with pytest.raises(JaxrelError, match="larger than 4 MiB"):
            MetadataReader(limits=Limits(connect=5, deadline=20), cache=tmp_path / "m").metadata(file)


def test_range_reads_share_one_deadline(tmp_path: Path) -> None:
    """Each range read within the deadline, the reads of one wheel together past it: refused, not added up."""
    wheel = make_wheel(tmp_path / "w", "probe", "1.0", padding=900_000)  # METADATA outside the tail: two reads
    with SimpleIndexServer() as served:
        served.add("slow", Behaviour(delay=1.2), probe=[wheel])
        file = Index([served.url("slow")], cache=tmp_path / "cache", refresh=True).listing("probe").files[0]
        reader = MetadataReader(limits=Limits(connect=5, deadline=2, retries=0), cache=tmp_path / "m")
        with pytest.raises(JaxrelError, match="took more than 2 s|no complete answer within"):
            reader.metadata(file)


def test_escape_sequences_from_the_index_never_reach_the_terminal() -> None:
    reason = "\x1b]0;owned\x07\x1b[2J gone\r\n"
    (html_file,) = parse_html(f'<a href="probe-1.0.tar.gz" data-yanked="{reason}">x</a>',
                              "https://i.example/simple/probe/", "html", "probe")
    (json_file,) = parse_json({"files": [{"filename": "probe-1.0.tar.gz", "url": "probe-1.0.tar.gz",
                                          "yanked": reason}]}, "https://i.example/simple/probe/", "json", "probe")
    for file in (html_file, json_file):
        assert file.yanked is not None and "\x1b" not in file.yanked and "\r" not in file.yanked
        assert "\\x1b]0;owned" in file.yanked


def _served(tmp_path: Path) -> tuple[SimpleIndexServer, IndexFile]:
    wheel = make_wheel(tmp_path / "w", "probe", "1.0", ("numpy>=2",))
    served = SimpleIndexServer().__enter__()
    served.add("idx", probe=[wheel])
    file = Index([served.url("idx")], cache=tmp_path / "cache", refresh=True).listing("probe").files[0]
    return served, file


@pytest.mark.parametrize("planted", ["garbage", "other-project", "directory", "full-directory", "symlink", "fifo"])
def test_the_metadata_cache_is_a_hint_never_trusted(planted: str, tmp_path: Path) -> None:
    served, file = _served(tmp_path)
    try:
        cache = tmp_path / "metadata"
        cache.mkdir()
        entry = cache / f"{file.sha256}.metadata"
        secret = tmp_path / "secret.txt"
        secret.write_text("Metadata-Version: 2.1\nName: probe\nVersion: 1.0\nRequires-Dist: planted-secret\n")
        if planted == "garbage":
            entry.write_bytes(b"\xff\x00" * 100)
        elif planted == "other-project":
            entry.write_text("Metadata-Version: 2.1\nName: torch\nVersion: 9.9\n")
        elif planted == "directory":
            entry.mkdir()
        elif planted == "full-directory":
            entry.mkdir()
            (entry / "x").write_text("x")
        elif planted == "symlink":
            entry.symlink_to(secret)
        else:
            os.mkfifo(entry)
        reader = MetadataReader(limits=Limits(connect=5, deadline=20), cache=cache)
        metadata = reader.metadata(file)
        assert metadata.requires_dist == ("numpy>=2",) and reader.cached == 0
        assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # nothing half-written left behind
        if planted in ("garbage", "other-project", "directory", "symlink"):
            assert entry.is_file() and not entry.is_symlink()  # replaced by the verified answer
            assert MetadataReader(cache=cache).metadata(file) == metadata
    finally:
        served.__exit__(None, None, None)
