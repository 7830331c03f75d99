"""The archive boundary through the CLI: damaged wheels and sdists in a wheelhouse (``matrix``) and in a
release's dist directory (``release verify``).

A damaged archive jaxrel is asked to read is bad input (exit 2) in one line naming the file, the
member or field, what was expected and what was found; in ``release verify`` it is that file's
problem (exit 1, the report on stdout). Never a traceback, never a file changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import archive_kit as kit
import pytest
from boundary_cli import run, tree_digests

from jaxrel.distributions import archives, wheels
from jaxrel.family import jax_profile

REPO = Path(__file__).resolve().parents[2]
M = kit.METADATA
META = f"{kit.DIST_INFO}/METADATA"

WHEELS: dict[str, tuple[bytes, tuple[str, ...]]] = {  # name → (wheel bytes, what the line names)
    "metadata-version": (kit.wheel_bytes(M.replace(b"0.9.9\nReq", b"banana\nReq")),
                         ("METADATA field Version", "'banana' is invalid")),
    "metadata-name-latin1": (kit.wheel_bytes(M.replace(b"Name: jax", b"Name: j\xffax")), ("METADATA is not UTF-8",)),
    "metadata-summary-latin1": (kit.wheel_bytes(M.replace(b"Name: jax", b"Name: jax\nSummary: caf\xe9")),
                                ("METADATA is not UTF-8",)),  # packaging took this one as it was
    "metadata-requires-dist": (kit.wheel_bytes(M + b"Requires-Dist: numpy>=>2\n"),
                               ("field Requires-Dist", "'numpy>=>2'")),
    "metadata-requires-python": (kit.wheel_bytes(M.replace(b">=3.11", b">>3")), ("field Requires-Python",)),
    "metadata-empty": (kit.wheel_bytes(b""), ("METADATA field Name", "required")),
    "metadata-huge-version": (kit.wheel_bytes(M.replace(b"0.9.9\nReq", b"0." + b"9" * 5000 + b"\nReq")),
                              ("METADATA field Version",)),
    "record-md5": (kit.wheel_bytes(record=kit.record_of({"a": b""}).replace(b"sha256=", b"md5=")),
                   ("RECORD line 1", "'md5=")),
    "record-shake": (kit.wheel_bytes(record=b"a,shake_128=AAAA,1\n"), ("RECORD line 1", "shake_128")),
    "record-parameterised": (kit.wheel_bytes(record=b"a,sha256;len=3=AAAA,1\n"), ("RECORD line 1", "sha256;len")),
    "record-huge-field": (kit.wheel_bytes(record=b'a,"' + b"x" * 200_000 + b'",1\n'),
                          ("RECORD is not CSV", "field larger than field limit")),
    "record-latin1": (kit.wheel_bytes(record=b"\xff\xfe"), ("RECORD is not UTF-8",)),
    "record-missing-member": (kit.wheel_bytes(record=b"jax/__init__.py,,\n"), ("not listed in RECORD",)),
    "wheel-bad-tag": (kit.wheel_bytes(wheel=kit.WHEEL.replace(b"py3-none-any", b"py3-none")),
                      ("WHEEL Tag 'py3-none'",)),
    "wheel-tag-junk": (kit.wheel_bytes(wheel=kit.WHEEL.replace(b"py3-none-any", b"py3-n$ne-any")),
                       ("WHEEL Tag 'py3-n$ne-any'",)),
    "wheel-latin1": (kit.wheel_bytes(wheel=b"Tag: py3-none-\xe4ny\n"), ("WHEEL is not UTF-8",)),
    "encrypted": (kit.wheel_bytes(flags={META: 1}), (f"member {META} is encrypted",)),
    "unknown-compression": (kit.wheel_bytes(method={META: 99}), (f"member {META} is unreadable", "compression")),
    "bomb": (kit.wheel_bytes(M + b"X" * (20 << 20)), (f"member {META} unpacks to 20 MiB",)),
    "not-a-zip": (b"not a zip", ("not a readable wheel",)),
    "truncated": (kit.wheel_bytes()[:300], ("not a readable wheel",)),
}
SDISTS: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "pkg-info-version": (kit.sdist_bytes(M.replace(b"0.9.9\nReq", b"banana\nReq")), ("PKG-INFO field Version",)),
    "pkg-info-requires": (kit.sdist_bytes(M + b"Requires-Dist: ???\n"), ("PKG-INFO field Requires-Dist",)),
    "not-a-tar": (b"\x1f\x8b\x08\x00 not really gzip", ("not a readable sdist",)),
}


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("JAXREL_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "index" / "simple").mkdir(parents=True)  # an empty file:// index: the wheelhouse is all there is
    return tmp_path


@pytest.mark.parametrize("case", sorted(WHEELS))
def test_a_damaged_wheel_in_a_wheelhouse_is_exit_2(sandbox: Path, case: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data, names = WHEELS[case]
    wheel = kit.write(sandbox / "house", kit.FILENAME, data)
    before = tree_digests(sandbox, skip=sandbox / "cache")
    ran = run(["matrix", "--frontend", "jax==0.9.9", "--wheelhouse", str(wheel.parent),
               "--index-url", (sandbox / "index" / "simple").as_uri()], capsys)
    ran.one_line_error(2, str(wheel), *names)
    assert tree_digests(sandbox, skip=sandbox / "cache") == before


@pytest.mark.parametrize("case", sorted(SDISTS))
def test_a_damaged_sdist_in_a_wheelhouse_is_exit_2(sandbox: Path, case: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data, names = SDISTS[case]
    sdist = kit.write(sandbox / "house", "jax-0.9.9.tar.gz", data)
    ran = run(["matrix", "--wheelhouse", str(sdist.parent), "--index-url", (sandbox / "index" / "simple").as_uri()],
              capsys)
    ran.one_line_error(2, str(sdist), *names)


def test_the_good_wheel_passes_the_boundary(sandbox: Path) -> None:
    """The kit's undamaged wheel is read (so each case above fails for its damage alone)."""
    wheel = kit.write(sandbox / "house", kit.FILENAME, kit.wheel_bytes())
    info = wheels.inspect(wheel, jax_profile())
    assert (info.name, info.version, info.tags, info.minimum_backend) == ("jax", "0.9.9", ["py3-none-any"], "0.9.1")
    assert wheels.verify_record(wheel) == 5
    sdist = kit.write(sandbox / "house", "jax-0.9.9.tar.gz", kit.sdist_bytes())
    assert wheels.inspect(sdist, jax_profile()).requires_python == ">=3.11"


@pytest.mark.parametrize("case", ["metadata-version", "record-md5", "wheel-bad-tag", "encrypted", "bomb",
                                  "unknown-compression", "record-huge-field"])
def test_release_verify_reports_a_damaged_wheel_as_its_problem(sandbox: Path, case: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    data, names = WHEELS[case]
    dist = sandbox / "dist"
    kit.write(dist, kit.FILENAME, data)
    (dist / "manifest.json").write_text(json.dumps({
        "schema": 1, "family": "jax", "version": "0.9.9", "tag": "v0.9.9", "artifacts": [
            {"file": kit.FILENAME, "distribution": "jax", "version": "0.9.9", "role": "frontend", "kind": "wheel",
             "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}]}))
    before = tree_digests(sandbox, skip=sandbox / "cache")
    ran = run(["release", "verify", str(dist), "--project", str(REPO / "tests" / "data" / "splitfam")], capsys)
    assert ran.code == 1 and "Traceback" not in ran.err and not ran.error_lines, ran.err[-800:]
    assert "FAIL" in ran.out and all(name.split(" is ")[0].split(" unpacks")[0] in ran.out for name in names), ran.out
    assert tree_digests(sandbox, skip=sandbox / "cache") == before


def test_an_archive_unpacking_past_the_total_cap_is_refused_before_reading(sandbox: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = kit.write(sandbox / "house", kit.FILENAME, kit.wheel_bytes(extra={"jax/zeros.bin": b"\0" * (3 << 20)}))
    monkeypatch.setattr(archives, "MAX_UNPACKED", 2 << 20)
    with pytest.raises(wheels.WheelError, match=r"unpacking to 3 MiB, more than a wheel has .*2 MiB"):
        wheels.verify_record(wheel)


def test_an_sdist_inflating_past_its_cap_is_refused_while_listed(sandbox: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("PKG-INFO", kit.METADATA), ("zeros.bin", b"\0" * (3 << 20)), ("setup.py", b"")):
            info = tarfile.TarInfo(f"jax-0.9.9/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    sdist = kit.write(sandbox / "house", "jax-0.9.9.tar.gz", buffer.getvalue())
    monkeypatch.setattr(archives, "MAX_SDIST", 2 << 20)
    with pytest.raises(wheels.WheelError, match="more than an sdist has"):
        wheels.inspect(sdist, jax_profile())


def test_a_damaged_inspection_cache_entry_is_a_miss(sandbox: Path) -> None:
    wheel = kit.write(sandbox / "house", kit.FILENAME, kit.wheel_bytes())
    info = wheels.inspect(wheel, jax_profile())
    (entry,) = (sandbox / "cache" / "inspect").glob(f"{info.sha256}-*.json")
    for damage in ('{"requires_dist": 5}', "[" * 100_000, json.dumps({**json.loads(entry.read_text()),
                                                                       "requires_dist": ["numpy>=>2"]})):
        entry.write_text(damage)
        assert wheels.inspect(wheel, jax_profile()) == info  # read from the wheel again, and the entry rewritten
        assert json.loads(entry.read_text())["requires_dist"] == info.requires_dist
