"""Listing the GPU code in a CUDA shared object: damaged or foreign files are one-line BadInput errors.

The real thing (the extension's CUDA build, sm_80/sm_90 SASS and PTX, cross-checked against cuobjdump) is
tests/integration/test_build_cuda.py.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxrel.errors import BadInput
from jaxrel.extension.fatbin import GpuCode, fatbin_section, gpu_code


def _elf(sections: list[tuple[bytes, bytes]]) -> bytes:
    """A minimal little-endian ELF64 with the given (name, contents) sections and a name table."""
    names = b"\0" + b"".join(name + b"\0" for name, _ in sections) + b".shstrtab\0"
    body = bytearray(b"\x7fELF\x02\x01\x01" + bytes(57))
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    name_at = 1
    for name, data in [*sections, (b".shstrtab", names)]:
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, len(body), len(data), 0, 0, 1, 0))
        name_at += len(name) + 1
        body += data
    shoff = len(body)
    body += b"".join(headers)
    struct.pack_into("<Q", body, 0x28, shoff)
    struct.pack_into("<HHH", body, 0x3A, 64, len(headers), len(headers) - 1)
    return bytes(body)


def _fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fat binary of (kind, arch) entries, each with an 8-byte payload."""
    body = b"".join(struct.pack("<HHIQ", kind, 0, 64, 8) + bytes(12) + struct.pack("<I", arch) + bytes(32) + bytes(8)
                    for kind, arch in entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_lists_sass_and_ptx_entries(tmp_path: Path) -> None:
    so = tmp_path / "x.so"
    so.write_bytes(_elf([(b".text", b"\x90" * 8), (b".nv_fatbin", _fatbin([(2, 80), (2, 90), (1, 90), (2, 90)]))]))
    assert gpu_code(so) == [GpuCode("ptx", 90), GpuCode("sass", 80), GpuCode("sass", 90)]
    assert [str(code) for code in gpu_code(so)] == ["compute_90", "sm_80", "sm_90"]


def test_a_cpu_only_object_has_no_gpu_code() -> None:
    interpreter = Path(sys.executable).resolve()
    assert fatbin_section(interpreter.read_bytes()) == b"" and gpu_code(interpreter) == []


@pytest.mark.parametrize("data", [b"", b"not an elf", b"\x7fELF\x01\x01" + bytes(60), b"\x7fELF\x02\x01" + bytes(10)])
def test_foreign_or_truncated_files_are_bad_input(tmp_path: Path, data: bytes) -> None:
    so = tmp_path / "x.so"
    so.write_bytes(data)
    with pytest.raises(BadInput) as raised:
        gpu_code(so)
    assert len(str(raised.value).splitlines()) == 1 and "Fix:" in str(raised.value)


def test_a_section_past_the_end_of_the_file_is_bad_input(tmp_path: Path) -> None:
    data = bytearray(_elf([(b".nv_fatbin", _fatbin([(2, 80)]))]))
    so = tmp_path / "x.so"
    so.write_bytes(bytes(data[:-100]))  # cut: the section headers are gone
    with pytest.raises(BadInput):
        gpu_code(so)


def test_unreadable_path_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="file not found"):
        gpu_code(tmp_path / "missing.so")


def _in_a_thread(call: Callable[[], object]) -> object:
    """``call``'s result or exception; a call still running after a minute (a loop, a blocked read) fails."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    assert outcome, "still running after a minute: it loops or waits"
    return outcome[0]


@pytest.mark.parametrize("header_size, fat_size", [(0, 0), (0, 64), (16, 0), (8, 0)])
def test_a_fat_binary_header_claiming_zero_sizes_ends_the_walk(tmp_path: Path, header_size: int,
                                                               fat_size: int) -> None:
    so = tmp_path / "x.so"
    section = struct.pack("<IHHQ", 0xBA55ED50, 1, header_size, fat_size) + bytes(64)
    so.write_bytes(_elf([(b".nv_fatbin", section)]))
    result = _in_a_thread(lambda: gpu_code(so))
    if header_size >= 16:  # an empty fat binary, then padding
        assert result == []
    else:
        assert isinstance(result, BadInput) and ".nv_fatbin is damaged" in str(result)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "x.so"
    os.mkfifo(fifo)
    result = _in_a_thread(lambda: gpu_code(fifo))
    assert isinstance(result, BadInput) and "a FIFO, not a regular file" in str(result)


def test_a_device_is_refused_not_read() -> None:
    result = _in_a_thread(lambda: gpu_code(Path("/dev/zero")))
    assert isinstance(result, BadInput) and "a character device, not a regular file" in str(result)


@settings(max_examples=300, deadline=None)
@given(section=st.binary(max_size=400), magic_at=st.lists(st.integers(0, 399), max_size=4))
def test_any_section_gives_a_list_or_one_line(tmp_path_factory: pytest.TempPathFactory, section: bytes,
                                               magic_at: list[int]) -> None:
    data = bytearray(section)
    for at in magic_at:  # fat binary headers planted where the walk may land on them
        if at + 4 <= len(data):
            data[at:at + 4] = struct.pack("<I", 0xBA55ED50)
    so = tmp_path_factory.mktemp("f") / "x.so"
    so.write_bytes(_elf([(b".nv_fatbin", struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(data)) + bytes(data))]))
    result = _in_a_thread(lambda: gpu_code(so))
    assert isinstance(result, list) or (isinstance(result, BadInput) and len(str(result).splitlines()) == 1)
