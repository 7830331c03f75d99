"""RECORD checks read stored and deflated members straight from the file (ISA-L inflates them, the standard
library's zlib without the release extra): the verdict must be zipfile's for every wheel, honest or altered,
with either inflater, and no member may inflate past its size."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import archive_kit as kit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxrel.distributions import archives
from jaxrel.distributions.archives import WheelError, verify_record

FAST_INFLATER = archives.INFLATE


@pytest.fixture(autouse=True, scope="module", params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs with the release extra's inflater and with the fallback (same verdicts)."""
    archives.INFLATE = FAST_INFLATER if request.param == "isal" else zlib
    yield request.param
    archives.INFLATE = FAST_INFLATER


def _zip_verdict(path: Path) -> str:
    """What zipfile (CRC and all) and hashlib say of every hashed member: ``ok`` or the first bad member."""
    with zipfile.ZipFile(path) as archive:
        rows = archive.read(f"{kit.DIST_INFO}/RECORD").decode().splitlines()
        record = {name: digest for name, digest, _ in (row.split(",") for row in rows)}
        for info in archive.infolist():
            if not record.get(info.filename):
                continue
            try:
                data = archive.read(info)
            except (zipfile.BadZipFile, EOFError, zlib.error):
                return info.filename
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if record[info.filename] != f"sha256={digest}":
                return info.filename
    return "ok"


def _verdict(path: Path) -> str:
    try:
        verify_record(path)
    except WheelError as error:
        return str(error).split("member ", 1)[1].split(" ", 1)[0]
    return "ok"


def _wheel(tmp_path: Path, members: dict[str, bytes], stored: frozenset[str] = frozenset(),
           record_members: dict[str, bytes] | None = None) -> Path:
    """A wheel of ``members``, RECORD over ``record_members`` (default: the members themselves)."""
    record = kit.record_of(record_members if record_members is not None else members)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in {**members, f"{kit.DIST_INFO}/RECORD": record}.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    path = tmp_path / kit.FILENAME
    path.write_bytes(buffer.getvalue())
    return path


def test_the_fast_reader_is_the_one_in_use() -> None:
    """ISA-L comes with the release extra (the test environment has it): the speed is measured with it."""
    assert FAST_INFLATER.__name__ == "isal.isal_zlib"


def test_a_large_honest_wheel_passes_and_an_altered_byte_is_named(tmp_path: Path) -> None:
    big = bytes(range(256)) * (40 << 12)  # 40 MiB: many 1 MiB reads, many 4 MiB inflate steps
    path = _wheel(tmp_path, {"pkg/big.so": big, "pkg/stored.bin": b"s" * 5000}, stored=frozenset({"pkg/stored.bin"}))
    assert verify_record(path) == 3
    changed = _wheel(tmp_path, {"pkg/big.so": big[:-1] + b"\x00", "pkg/stored.bin": b"s" * 5000},
                     record_members={"pkg/big.so": big, "pkg/stored.bin": b"s" * 5000})
    with pytest.raises(WheelError, match="member pkg/big.so does not match its RECORD hash"):
        verify_record(changed)


def test_a_local_header_naming_another_file_is_refused(tmp_path: Path) -> None:
    path = _wheel(tmp_path, {"pkg/aaaa.py": b"a = 1\n", "pkg/bbbb.py": b"b = 2\n"})
    data = bytearray(path.read_bytes())
    assert data[30:41] == b"pkg/aaaa.py"  # the first member's local header
    data[30:41] = b"pkg/zzzz.py"  # the local header only: the central directory still says aaaa
    path.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="pkg/aaaa.py is unreadable.*names another file"):
        verify_record(path)


def test_a_member_inflating_past_its_declared_size_is_read_to_that_size_and_refused(tmp_path: Path) -> None:
    """The central directory says 10 bytes; the deflate stream holds 8 MiB: 10 are read (as zipfile reads), and
    they are not what RECORD hashed."""
    path = _wheel(tmp_path, {"pkg/bomb.bin": b"\x00" * (8 << 20)})
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    assert data[central + 46: central + 58] == b"pkg/bomb.bin"
    data[central + 24: central + 28] = (10).to_bytes(4, "little")  # uncompressed size
    path.write_bytes(bytes(data))
    blocks = list(archives.Archive(path)._chunks("pkg/bomb.bin", 10, hashed=True))
    assert b"".join(blocks) == b"\x00" * 10
    with pytest.raises(WheelError, match="pkg/bomb.bin does not match its RECORD hash"):
        verify_record(path)


def test_a_truncated_deflate_stream_is_refused(tmp_path: Path) -> None:
    path = _wheel(tmp_path, {"pkg/data.bin": bytes(range(256)) * 4000})
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    size = int.from_bytes(data[central + 20: central + 24], "little")
    data[central + 20: central + 24] = (size // 2).to_bytes(4, "little")  # compressed size: half the stream
    path.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="pkg/data.bin is unreadable.*the stream ends before its 1024000 bytes"):
        verify_record(path)


@settings(max_examples=60, deadline=None)
@given(members=st.dictionaries(st.sampled_from(["pkg/a.py", "pkg/b.so", "pkg/c.txt", "pkg/d/e.bin"]),
                               st.binary(max_size=3000), min_size=1),
       stored=st.frozensets(st.sampled_from(["pkg/a.py", "pkg/b.so", "pkg/c.txt", "pkg/d/e.bin"])),
       flip=st.one_of(st.none(), st.integers(min_value=0)))
def test_no_wheel_pip_reads_is_refused_and_no_altered_member_passes(tmp_path_factory: pytest.TempPathFactory,
                                                                    members: dict[str, bytes],
                                                                    stored: frozenset[str], flip: int | None) -> None:
    path = _wheel(tmp_path_factory.mktemp("w"), members, stored)
    if flip is not None:  # one byte of a member's data changed (inside a local header's payload)
        data = bytearray(path.read_bytes())
        with zipfile.ZipFile(path) as archive:
            payloads = [(info.header_offset + 30 + len(info.filename), info.compress_size)
                        for info in archive.infolist() if info.compress_size and not info.filename.endswith("RECORD")]
        if payloads:
            start, size = payloads[flip % len(payloads)]
            data[start + flip % size] ^= 0x40
            path.write_bytes(bytes(data))
    ours = _verdict(path)
    if _zip_verdict(path) == "ok":  # what pip (zipfile) installs is never refused
        assert ours == "ok"
    if _first_altered(path) != "ok":  # a member whose declared bytes are not RECORD's never passes
        assert ours == _first_altered(path)


def _first_altered(path: Path) -> str:
    """The first member whose declared size of inflated bytes (stdlib zlib, in one call) is not what RECORD hashed,
    or ``ok``."""
    with zipfile.ZipFile(path) as archive:
        rows = archive.read(f"{kit.DIST_INFO}/RECORD").decode().splitlines()
        record = {name: digest for name, digest, _ in (row.split(",") for row in rows)}
        raw = path.read_bytes()
        for info in archive.infolist():
            if not record.get(info.filename):
                continue
            start = info.header_offset + 30 + len(info.filename)
            payload = raw[start: start + info.compress_size]
            try:
                inflater = zlib.decompressobj(-15)  # up to the declared size and no further, as a reader stops
                deflated = info.compress_type and info.file_size
                data = inflater.decompress(payload, info.file_size) if deflated else payload
            except zlib.error:
                data = b""
            data = data[:info.file_size]
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if len(data) != info.file_size or record[info.filename] != f"sha256={digest}":
                return info.filename
    return "ok"
