"""How long ``release collect`` + ``release verify`` take on a whole real jax release, and where the time goes.

Run: ``python benchmarks/release_collect.py [--version V] [--workdir DIR] [--compare]`` (or
``nox -s bench -- release_collect``). Every wheel and the sdist of jax, jaxlib and the CUDA plugins and pjrts
released with them at ``V`` (default: the newest final jax release with a jaxlib) come through jaxrel's index
client (sha256-verified, cached), hard-linked under ``DIR/artifacts/<distribution>/`` as a CI collect job
downloads them. Then, in fresh processes, as a release job runs them:

1. ``jaxrel release collect DIR/artifacts --output OUT --family jax --version V`` (RECORD of every member, the
   grid, the previous release's grid from the index, asked while the files are read);
2. ``jaxrel release verify OUT --family jax`` (sha256 against the manifest, which binds the files to the bytes
   collect read member by member; pins, twine on each wheel's metadata);

and beside them ``verify --deep``, which reads every member again (what verify did before: a second pass).
With ``--compare``, in this process the two parts of that work side by side with the way they were done
before: every member against RECORD through :mod:`zipfile` (stdlib zlib and CRC) against jaxrel's reader
(ISA-L, no CRC: the RECORD hash is stronger), and that reader with the stdlib's zlib; ``twine check`` of the
whole files against twine given each wheel's metadata alone (the verdicts must be identical). Prints seconds
(and each command's CPU time, steadier than the wall clock on a shared machine) and ratios; the target
(collect + verify ≤ 20 s warm) is printed beside them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel import policy  # noqa: E402
from jaxrel._util.parallel import workers  # noqa: E402
from jaxrel.distributions import archives  # noqa: E402
from jaxrel.distributions.archives import verify_record  # noqa: E402
from jaxrel.distributions.index import Index  # noqa: E402
from jaxrel.release.verify import _twine_share, twine_check_many  # noqa: E402

TARGET_S = 20.0
FAMILY = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")


def fetch(version: str | None, artifacts: Path) -> tuple[str, list[Path]]:
    """Every file of the family at ``version`` under ``artifacts/<distribution>/``."""
    index = Index.from_pip()
    if version is None:
        backends = {str(v) for v in index.listing("jaxlib").versions() if policy.is_final(v)}
        version = str(max(v for v in index.listing("jax").versions() if policy.is_final(v) and str(v) in backends))
    paths = []
    for distribution in FAMILY:
        files = [f for f in index.listing(distribution).files if f.version is not None and str(f.version) == version]
        for file in files:
            cached = index.download(file)
            target = artifacts / distribution / file.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(cached, target)
            paths.append(target)
    return version, paths


CPU_SECONDS: dict[str, float] = {}  # each command's user + system time (less noisy than the wall clock here)
def timed_cli(*args: str) -> float:
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jaxrel", *args], capture_output=True, text=True, cwd="/")
    seconds = time.perf_counter() - start
    after = os.times()
    CPU_SECONDS[args[1] + (" --deep" if "--deep" in args else "")] = (
        after.children_user - before.children_user + after.children_system - before.children_system)
    if done.returncode != 0:
        raise SystemExit(f"jaxrel {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return seconds


def record_by_zipfile(path: Path) -> None:
    """Every hashed member through zipfile (stdlib zlib, CRC): how verify read them before."""
    with zipfile.ZipFile(path) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [line.split(",") for line in archive.read(record_name).decode().splitlines() if line]
        expected = {row[0]: row[1] for row in rows if len(row) > 1 and row[1]}
        for name, digest in expected.items():
            algorithm, _, value = digest.partition("=")
            hasher = hashlib.new(algorithm)
            with archive.open(name) as handle:
                while block := handle.read(1 << 20):
                    hasher.update(block)
            assert base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode() == value, name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", help="the jax release (default: the newest final one with a jaxlib)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench" / "release_collect")
    parser.add_argument("--compare", action="store_true", help="also time the old ways of verify's two parts")
    args = parser.parse_args()
    start = time.perf_counter()
    version, paths = fetch(args.version, args.workdir / "artifacts")
    size = sum(p.stat().st_size for p in paths)
    print(f"jax {version}: {len(paths)} files, {size / 1e9:.2f} GB ({time.perf_counter() - start:.1f} s to fetch "
          f"or find in the cache); {workers()} workers on {os.cpu_count()} CPUs")
    out = args.workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    collect = timed_cli("release", "collect", str(args.workdir / "artifacts"), "--output", str(out),
                        "--family", "jax", "--version", version)
    verify = timed_cli("release", "verify", str(out), "--family", "jax")
    deep = timed_cli("release", "verify", str(out), "--family", "jax", "--deep")
    cpu = CPU_SECONDS
    print(f"  collect           {collect:6.1f} s   (CPU {cpu['collect']:.1f} s)")
    print(f"  verify            {verify:6.1f} s   (CPU {cpu['verify']:.1f} s)")
    print(f"  verify --deep     {deep:6.1f} s   (CPU {cpu['verify --deep']:.1f} s; every member read again)")
    print(f"  collect + verify  {collect + verify:6.1f} s   (target {TARGET_S:.0f} s; CPU "
          f"{cpu['collect'] + cpu['verify']:.1f} s; with --deep {collect + deep:.1f} s)")
    if not args.compare:
        return
    wheels = [p for p in paths if p.name.endswith(".whl")]
    start = time.perf_counter()
    for path in wheels:
        record_by_zipfile(path)
    before = time.perf_counter() - start
    start = time.perf_counter()
    for path in wheels:
        verify_record(path)
    now = time.perf_counter() - start
    print(f"  RECORD of every member, one process: zipfile {before:.1f} s, jaxrel's reader {now:.1f} s "
          f"({before / now:.2f}x)")
    fast, archives.INFLATE = archives.INFLATE, zlib  # the same reader with the fallback inflater
    try:
        start = time.perf_counter()
        for path in wheels:
            verify_record(path)
        fallback = time.perf_counter() - start
    finally:
        archives.INFLATE = fast
    print(f"  jaxrel's reader inflating with the stdlib's zlib {fallback:.1f} s, with {fast.__name__} {now:.1f} s "
          f"({fallback / now:.2f}x)")
    start = time.perf_counter()
    whole = twine_on_whole_files(paths)
    before = time.perf_counter() - start
    start = time.perf_counter()
    given_metadata = twine_check_many(paths)
    now = time.perf_counter() - start
    assert whole == given_metadata, "twine's verdict on a wheel's metadata differs from its verdict on the wheel"
    print(f"  twine check --strict, one per worker: whole files {before:.1f} s, each wheel's metadata alone "
          f"{now:.1f} s ({before / now:.2f}x); verdicts identical")


def twine_on_whole_files(paths: list[Path]) -> dict[Path, str | None]:
    """``twine check`` of the files as they are, one twine per worker over a share (how verify ran it before)."""
    shares = [paths[number::workers()] for number in range(workers())]
    with ThreadPoolExecutor(len(shares)) as pool:
        return {path: verdict for share in pool.map(_twine_share, shares) for path, verdict in share.items()}

if __name__ == "__main__":
    main()
