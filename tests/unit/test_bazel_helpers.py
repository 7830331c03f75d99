"""The helpers behind the Bazel build: bazel/wheel_builder.py, bazel/xla_ffi_fetch.py and jaxrel.distributions.bazel."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from jaxrel import guard, releasedata
from jaxrel.distributions import bazel as build
from jaxrel.distributions.wheels import inspect, verify_record
from jaxrel.family import jax_profile

REPO = Path(__file__).resolve().parents[2]
RELEASE_DATA = REPO / "jaxrel" / "data" / "jax.json"


def load(name: str) -> ModuleType:
    """A module of bazel/ loaded from its path, as Bazel runs it (not importable as a package)."""
    spec = importlib.util.spec_from_file_location(f"bazel_{name}", REPO / "bazel" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wheel_builder = load("wheel_builder")
fetch = load("xla_ffi_fetch")


def header(major: int, minor: int) -> str:
    return f"// XLA FFI\n#define XLA_FFI_API_MAJOR {major}  // breaking\n#define XLA_FFI_API_MINOR {minor}\n"


# bazel/wheel_builder.py

DIST_INFO = "rmsnorm-0.1.0.dist-info"
WHEEL_NAME = "rmsnorm-0.1.0-cp311-cp311-linux_x86_64.whl"
REQUIRES = ["jax>=0.9.1", "jaxlib>=0.9.1", "numpy>=1.26; python_version >= '3.11'"]


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    """Input files (destination in the wheel → source), with modes and times a wheel must not leak."""
    folder = tmp_path / "src"
    folder.mkdir()
    contents = {"rmsnorm/__init__.py": b"from rmsnorm._ops import rms_norm\n",
                "rmsnorm/_ops.py": b"def rms_norm(x):\n    return x\n",
                "rmsnorm/_rmsnorm.so": b"\x7fELF fake shared object",
                "rmsnorm/py.typed": b""}
    paths = {}
    for index, (destination, data) in enumerate(contents.items()):
        path = folder / destination.replace("/", "_")
        path.write_bytes(data)
        path.chmod(0o700 if index % 2 else 0o600)
        paths[destination] = path
    return paths


def build_wheel(out: Path, sources: dict[str, Path], *extra: str) -> int:
    argv = ["--out", str(out), "--name", "rmsnorm", "--version", "0.1.0", "--tag", "cp311-cp311-linux_x86_64",
            "--summary", "RMS norm as an XLA FFI custom call", "--license", "Apache-2.0",
            "--requires-python", ">=3.11", *(f"--requires={r}" for r in REQUIRES), *extra]
    # In reverse order: the archive's order must not depend on the order of --file.
    argv += [f"--file={source}={destination}" for destination, source in reversed(sources.items())]
    return int(wheel_builder.main(argv))


@pytest.fixture
def wheel(tmp_path: Path, sources: dict[str, Path]) -> Path:
    out = tmp_path / WHEEL_NAME
    assert build_wheel(out, sources) == 0
    return out


def test_same_inputs_give_identical_bytes(tmp_path: Path, sources: dict[str, Path]) -> None:
    first, second = tmp_path / "a" / WHEEL_NAME, tmp_path / "b" / WHEEL_NAME
    first.parent.mkdir()
    second.parent.mkdir()
    assert build_wheel(first, sources) == 0
    for path in sources.values():
        os.utime(path, (1_700_000_000, 1_700_000_000))
        path.chmod(0o755)
    assert build_wheel(second, dict(reversed(sources.items()))) == 0
    assert first.read_bytes() == second.read_bytes()


def test_record_lists_every_member_with_hash_and_size_and_itself_last(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = archive.read(f"{DIST_INFO}/RECORD").decode("utf-8")
        rows = list(csv.reader(io.StringIO(record)))
        for path, digest, size in rows[:-1]:
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and "=" not in expected
            assert int(size) == len(data)
    assert [row[0] for row in rows] == names
    assert rows[-1] == [f"{DIST_INFO}/RECORD", "", ""]
    assert record.endswith(f"{DIST_INFO}/RECORD,,\n")
    assert verify_record(wheel) == len(names)


def test_members_are_sorted_with_dist_info_last(wheel: Path, sources: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert names == [*sorted(sources), f"{DIST_INFO}/METADATA", f"{DIST_INFO}/WHEEL", f"{DIST_INFO}/RECORD"]


def test_timestamps_and_permissions_are_fixed(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    modes = {info.filename: info.external_attr >> 16 for info in infos}
    assert modes["rmsnorm/_rmsnorm.so"] == 0o100755
    assert {mode for name, mode in modes.items() if not name.endswith(".so")} == {0o100644}
    assert {info.compress_type for info in infos} == {zipfile.ZIP_DEFLATED}


def test_metadata_and_wheel_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{DIST_INFO}/METADATA").decode("utf-8")
        wheel_text = archive.read(f"{DIST_INFO}/WHEEL").decode("utf-8")
    lines = metadata.splitlines()
    assert lines[:6] == ["Metadata-Version: 2.1", "Name: rmsnorm", "Version: 0.1.0",
                         "Summary: RMS norm as an XLA FFI custom call", "License: Apache-2.0",
                         "Requires-Python: >=3.11"]
    assert [line for line in lines if line.startswith("Requires-Dist: ")] == [f"Requires-Dist: {r}" for r in REQUIRES]
    assert "Description-Content-Type" not in metadata
    assert "Tag: cp311-cp311-linux_x86_64\n" in wheel_text and "Root-Is-Purelib: false" in wheel_text


def test_description_is_the_markdown_body(tmp_path: Path, sources: dict[str, Path]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# rmsnorm\n\nAn *extension*.\n", encoding="utf-8")
    out = tmp_path / WHEEL_NAME
    assert build_wheel(out, sources, f"--description={readme}") == 0
    with zipfile.ZipFile(out) as archive:
        metadata = archive.read(f"{DIST_INFO}/METADATA").decode("utf-8")
    head, _, body = metadata.partition("\n\n")
    assert head.splitlines()[-1] == "Description-Content-Type: text/markdown"
    assert body == "# rmsnorm\n\nAn *extension*.\n"


def test_jaxrel_reads_the_wheel(wheel: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    info = inspect(wheel, jax_profile(), use_cache=False)
    assert (info.name, info.version, info.kind) == ("rmsnorm", "0.1.0", "wheel")
    assert info.tags == ["cp311-cp311-linux_x86_64"]
    assert info.requires_dist == [
        "jax>=0.9.1", "jaxlib>=0.9.1", 'numpy>=1.26; python_version >= "3.11"']
    assert info.requires_python == ">=3.11"


@pytest.mark.parametrize("files", [["a.py=pkg/x.py", "b.py=pkg/x.py"], ["no-destination.py"]])
def test_repeated_or_bad_file_destination_exits_1(tmp_path: Path, files: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 1\n")
    out = tmp_path / WHEEL_NAME
    argv = ["--out", str(out), "--name", "p", "--version", "1", "--tag", "py3-none-any", "--summary", "s"]
    argv += [f"--file={tmp_path}/{spec}" for spec in files]
    assert wheel_builder.main(argv) == 1
    assert "bad or repeated --file" in capsys.readouterr().err
    assert not out.exists()


def test_runs_as_a_script_with_the_standard_library_only(tmp_path: Path, sources: dict[str, Path]) -> None:
    out = tmp_path / "p-1-py3-none-any.whl"
    command = [sys.executable, "-I", "-S", str(REPO / "bazel" / "wheel_builder.py"), "--out", str(out),
               "--name", "p", "--version", "1", "--tag", "py3-none-any", "--summary", "s",
               f"--file={sources['rmsnorm/_ops.py']}=p/ops.py"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["p/ops.py", "p-1.dist-info/METADATA", "p-1.dist-info/WHEEL",
                                      "p-1.dist-info/RECORD"]


# bazel/xla_ffi_fetch.py


@pytest.mark.parametrize(("filename", "expected"), [
    ("jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl", ("0.10.2", "cp311", "cp311", ["manylinux_2_27_x86_64"])),
    ("jaxlib-0.4.30-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     ("0.4.30", "cp312", "cp312", ["manylinux2014_x86_64", "manylinux_2_17_x86_64"])),
    ("pkg-1.0-1build-py3-none-any.whl", ("1.0", "py3", "none", ["any"])),
])
def test_wheel_tags(filename: str, expected: tuple[str, str, str, list[str]]) -> None:
    assert fetch.wheel_tags(filename) == expected


@pytest.mark.parametrize("filename", ["jaxlib-0.10.2.tar.gz", "jaxlib-0.10.2-cp311.whl", "a-b-c-d-e-f-g.whl",
                                      "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.zip"])
def test_wheel_tags_of_a_bad_filename(filename: str) -> None:
    with pytest.raises(fetch.FetchError, match="is not a wheel filename"):
        fetch.wheel_tags(filename)


def test_ffi_api() -> None:
    assert fetch.ffi_api(header(0, 3)) == (0, 3)
    assert fetch.ffi_api(header(1, 12)) == (1, 12)
    with pytest.raises(fetch.FetchError, match="no XLA_FFI_API_MAJOR/MINOR"):
        fetch.ffi_api("#define XLA_FFI_API_MAJOR 0\n")


@pytest.mark.parametrize("text", [
    header(0, 3),
    header(2, 10),
    "#define\tXLA_FFI_API_MAJOR\t0\n#define  XLA_FFI_API_MINOR  4   /* additions */\n",
    "#ifndef X\n#define XLA_FFI_API_MINOR 1\n\n// Major\n#define XLA_FFI_API_MAJOR 0\n#endif\n",
])
def test_bazel_and_guard_read_headers_alike(text: str) -> None:
    assert ".".join(map(str, fetch.ffi_api(text))) == guard.ffi_api_in(text)


def make_zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def test_extract_include_extracts_only_the_package_include_tree(tmp_path: Path) -> None:
    wheel = make_zip(tmp_path / "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl", {
        "jaxlib/__init__.py": "",
        "jaxlib/include/": "",
        "jaxlib/include/xla/ffi/api/c_api.h": header(0, 3),
        "jaxlib/include/xla/ffi/api/api.h": "// api\n",
        "jaxlib/include/xla/ffi/ffi.h": "// ffi\n",
        "jaxlib/sub/include/nested.h": "// not the package's include\n",
        "include/top.h": "// no package\n",
        "jaxlib-0.10.2.dist-info/METADATA": "Name: jaxlib\n",
    })
    dest = tmp_path / "dest"
    written = fetch.extract_include(str(wheel), str(dest))
    assert written == ["xla/ffi/api/api.h", "xla/ffi/api/c_api.h", "xla/ffi/ffi.h"]
    on_disk = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert on_disk == written
    assert (dest / "xla/ffi/api/c_api.h").read_text() == header(0, 3)


def test_extract_include_never_writes_outside_dest(tmp_path: Path) -> None:
    wheel = make_zip(tmp_path / "w.whl", {"jaxlib/include/xla/ffi/api/c_api.h": header(0, 3),
                                          "jaxlib/include/../../escaped.h": "// outside\n"})
    dest = tmp_path / "a" / "dest"
    assert fetch.extract_include(str(wheel), str(dest)) == ["xla/ffi/api/c_api.h"]
    assert not list(tmp_path.rglob("escaped.h"))


def test_extract_include_without_c_api_h_is_an_error(tmp_path: Path) -> None:
    wheel = make_zip(tmp_path / "jaxlib-0.4.13-cp311-cp311-manylinux2014_x86_64.whl",
                     {"jaxlib/include/xla/ffi/api/api.h": "// api\n"})
    with pytest.raises(fetch.FetchError, match=r"jaxlib-0\.4\.13-.*\.whl has no include/xla/ffi/api/c_api\.h"):
        fetch.extract_include(str(wheel), str(tmp_path / "dest"))


def xla_tree(root: Path, major: int, minor: int) -> Path:
    target = root / "xla" / "ffi" / "api" / "c_api.h"
    target.parent.mkdir(parents=True)
    target.write_text(header(major, minor))
    return root


def run_local(tree: Path, dest: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = fetch.main(["--dest", str(dest), "--release-data", str(RELEASE_DATA), "--backend", "jaxlib",
                       "--local", str(tree)])
    out, err = capsys.readouterr()
    return code, out, err


def test_main_local_prints_api_and_minimum_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_local(xla_tree(tmp_path / "xla-src", 0, 3), tmp_path / "dest", capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == {"ffi_api": "0.3", "minimum_backend": "0.9.1"}


def test_main_local_with_an_unreleased_api_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_local(xla_tree(tmp_path / "xla-src", 0, 99), tmp_path / "dest", capsys)
    assert (code, out) == (1, "")
    assert err.startswith("xla_ffi: no released jaxlib provides XLA FFI API 0.99") and err.count("\n") == 1


def test_main_local_without_headers_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = run_local(tmp_path / "empty", tmp_path / "dest", capsys)
    assert (code, out) == (1, "")
    assert "has no xla/ffi/api/c_api.h" in err and "Fix: pass the root of an XLA source tree" in err


def test_main_local_as_a_script_with_the_standard_library_only(tmp_path: Path) -> None:
    tree = xla_tree(tmp_path / "xla-src", 0, 5)
    command = [sys.executable, "-I", "-S", str(REPO / "bazel" / "xla_ffi_fetch.py"), "--dest", str(tmp_path / "d"),
               "--release-data", str(RELEASE_DATA), "--backend", "jaxlib", "--local", str(tree)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ffi_api": "0.5", "minimum_backend": "0.12.0"}


def jaxlib_rows() -> dict[str, dict]:
    rows: dict[str, dict] = json.loads(RELEASE_DATA.read_text(encoding="utf-8"))["jaxlib"]
    return rows


def test_bazel_and_python_agree_on_the_first_release_with_each_api() -> None:
    rows = jaxlib_rows()
    apis = sorted({row["xla_ffi_api"] for row in rows.values() if row.get("xla_ffi_api")})
    assert len(apis) >= 3
    for api in apis:
        wanted = tuple(int(part) for part in api.split("."))
        assert fetch.first_release_with(rows, wanted) == releasedata.first_release_with_ffi_api("jax", "jaxlib", api)


def test_first_release_with_measured_facts() -> None:
    rows = jaxlib_rows()
    assert fetch.first_release_with(rows, (0, 3)) == "0.9.1"
    assert releasedata.first_release_with_ffi_api("jax", "jaxlib", "0.3") == "0.9.1"
    assert fetch.first_release_with(rows, (0, 0)) == releasedata.first_release_with_ffi_api("jax", "jaxlib", "0.0")
    highest = max(tuple(map(int, row["xla_ffi_api"].split("."))) for row in rows.values() if row.get("xla_ffi_api"))
    above = (highest[0], highest[1] + 1)
    assert fetch.first_release_with(rows, above) is None
    assert releasedata.first_release_with_ffi_api("jax", "jaxlib", f"{above[0]}.{above[1]}") is None
    assert fetch.first_release_with(rows, (1, 0)) is None


def test_first_release_with_compares_versions_as_numbers() -> None:
    rows = {"0.10.0": {"xla_ffi_api": "0.10"}, "0.9.0": {"xla_ffi_api": "0.9"}, "0.4.13": {"xla_ffi_api": None}}
    assert fetch.first_release_with(rows, (0, 9)) == "0.9.0"
    assert fetch.first_release_with(rows, (0, 10)) == "0.10.0"


# jaxrel/build.py


def test_first_error_prefers_the_fail_message() -> None:
    lines = ["INFO: Repository xla instantiated at:",
             "ERROR: An error occurred during the fetch of repository 'xla':",
             "ERROR: /ws/WORKSPACE:27:8: Error in fail: xla_ffi: no released jaxlib provides XLA FFI API 0.9. Fix: x",
             "ERROR: second"]
    assert build.first_error(lines) == "xla_ffi: no released jaxlib provides XLA FFI API 0.9. Fix: x"


def test_first_error_then_a_workspace_tools_refusal() -> None:
    refusal = "wheel_builder: p/_p.so is built for x86_64, the tag manylinux_2_36_aarch64 says aarch64: build ..."
    lines = ["ERROR: /ws/rmsnorm/BUILD.bazel:63:14: Assembling wheel x.whl failed: (Exit 1): python3.11 failed",
             refusal, "INFO: Elapsed time: 3.1s"]
    assert build.first_error(lines) == refusal


def test_first_error_then_the_first_error_line_then_the_last_line() -> None:
    assert build.first_error(["INFO: start", "ERROR:  /ws/BUILD:3:1: missing input", "ERROR: later"]) == \
        "/ws/BUILD:3:1: missing input"
    assert build.first_error(["INFO: start", "  killed  "]) == "killed"
    assert build.first_error([]) == "bazel failed with no output"


def test_built_files_reads_named_sets_of_files(tmp_path: Path) -> None:
    events = [
        {"id": {"started": {}}, "started": {"uuid": "x"}},
        {"id": {"namedSet": {"id": "0"}}, "namedSetOfFiles": {"files": [
            {"name": "rmsnorm/rmsnorm-0.1.0-cp311-cp311-linux_x86_64.whl",
             "uri": "file:///cache/bazel-out/k8-fastbuild/bin/rmsnorm/rmsnorm-0.1.0-cp311-cp311-linux_x86_64.whl"},
            {"name": "remote.whl", "uri": "bytestream://cache/blobs/abc/12"},
        ]}},
        {"id": {"namedSet": {"id": "1"}}, "namedSetOfFiles": {"files": [
            {"name": "a b.whl", "uri": "file:///cache/out%20dir/a%20b%2Bc.whl"},
            {"name": "no-uri"},
        ]}},
    ]
    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    assert build.built_files(path) == [
        Path("/cache/bazel-out/k8-fastbuild/bin/rmsnorm/rmsnorm-0.1.0-cp311-cp311-linux_x86_64.whl"),
        Path("/cache/out dir/a b+c.whl"),
    ]


def test_wheel_targets_maps_package_names_to_wheel_labels() -> None:
    assert build.wheel_targets(["rmsnorm", "//x:y", "@repo//a:b", ":local", "pkg/sub"]) == [
        "//rmsnorm:wheel", "//x:y", "@repo//a:b", ":local", "//pkg/sub:wheel"]


def test_wheel_targets_default_to_every_target() -> None:
    assert build.wheel_targets([]) == ["//..."]


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_find_launcher_without_bazel_names_the_install_script(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty-bin").mkdir()
    (tmp_path / "ws").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(build.BuildError, match="scripts/install_build_tools.sh"):
        build.find_launcher(tmp_path / "ws")


def test_find_launcher_prefers_the_local_bazelisk_then_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bazel = executable(tmp_path / "bin" / "bazel")
    monkeypatch.setenv("PATH", str(bazel.parent))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert build.find_launcher(workspace) == [str(bazel)]
    bazelisk = executable(tmp_path / "bin" / "bazelisk")
    assert build.find_launcher(workspace) == [str(bazelisk)]
    local = executable(workspace / build.LOCAL_BAZELISK)
    assert build.find_launcher(workspace) == [str(local)]
    local.chmod(0o644)  # not executable: skipped
    assert build.find_launcher(workspace) == [str(bazelisk)]
