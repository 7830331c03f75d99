"""bazel/wheel_builder.py packs no shared object built for another machine than its platform tag names: an
aarch64 Python's tags with the host's x86_64 compiler (``--config=manylinux_aarch64`` forgotten) is refused."""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("bazel_wheel_builder", REPO / "bazel" / "wheel_builder.py")
assert _SPEC is not None and _SPEC.loader is not None
wheel_builder = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(wheel_builder)


def _elf(machine: int) -> bytes:
    """The first 64 bytes of a little-endian 64-bit shared object for ``machine`` (EM_*)."""
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    head[16:18] = (3).to_bytes(2, "little")  # ET_DYN
    head[18:20] = machine.to_bytes(2, "little")
    return bytes(head)


def _host_object() -> Path:
    """A real object of this machine: the standard library's ctypes extension module, or the interpreter itself."""
    import _ctypes

    return Path(getattr(_ctypes, "__file__", None) or os.path.realpath(sys.executable))


def _build(tmp_path: Path, module: bytes, tag: str) -> tuple[int, Path]:
    source = tmp_path / "module.so"
    source.write_bytes(module)
    out = tmp_path / f"p-1-{tag}.whl"
    code = wheel_builder.main(["--out", str(out), "--name", "p", "--version", "1", "--tag", tag, "--summary", "s",
                               f"--file={source}=p/_p.so"])
    return code, out


def test_the_hosts_own_objects_are_read_as_this_machine() -> None:
    import platform

    assert wheel_builder.elf_machine(_host_object().read_bytes()) == platform.machine()


@pytest.mark.parametrize(("machine", "tag"), [(62, "cp311-cp311-manylinux_2_27_x86_64"),
                                              (183, "cp311-cp311-manylinux_2_27_aarch64"),
                                              (183, "cp311-cp311-linux_aarch64")])
def test_an_object_of_the_tagged_machine_is_packed(tmp_path: Path, machine: int, tag: str) -> None:
    code, out = _build(tmp_path, _elf(machine), tag)
    assert code == 0
    with zipfile.ZipFile(out) as archive:
        assert archive.read("p/_p.so") == _elf(machine)


@pytest.mark.parametrize(("machine", "tag", "built", "said"), [
    (62, "cp311-cp311-manylinux_2_36_aarch64", "x86_64", "aarch64"),
    (183, "cp311-cp311-manylinux_2_27_x86_64", "aarch64", "x86_64"),
    (40, "cp311-cp311-manylinux_2_27_aarch64", "e_machine=40", "aarch64"),  # EM_ARM: 32-bit arm
])
def test_an_object_of_another_machine_is_refused_and_no_wheel_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], machine: int, tag: str, built: str, said: str) -> None:
    code, out = _build(tmp_path, _elf(machine), tag)
    error = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert f"p/_p.so is built for {built}, the tag {tag.rsplit('-', 1)[1]} says {said}" in error
    assert ("--config=manylinux)" if said == "x86_64" else f"--config=manylinux_{said})") in error


def test_the_real_host_object_under_an_aarch64_tag_is_refused(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("this test reads an x86_64 object; this machine is " + platform.machine())
    code, out = _build(tmp_path, _host_object().read_bytes(), "cp311-cp311-manylinux_2_27_aarch64")
    assert code == 1 and not out.exists()
    assert "built for x86_64" in capsys.readouterr().err


@pytest.mark.parametrize("tag", ["py3-none-any", "cp311-cp311-win_amd64", "cp311-cp311-macosx_11_0_arm64"])
def test_tags_without_a_linux_machine_and_files_that_are_not_elf_are_not_judged(tmp_path: Path, tag: str) -> None:
    assert _build(tmp_path, _elf(62), tag)[0] == 0
    assert wheel_builder.machine_problems({"a.so": b"not an object", "b.py": b"\x7fELF"}, tag) == []
