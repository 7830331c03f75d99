"""The guard under concurrent first imports: each of N threads imports, at the same moment (a barrier), a different
package whose import calls the guard (as jax, a plugin and an extension each do), many times over; every thread must
get the same one verdict, refusing or accepting, and nothing else (no torn state). Each case runs in a fresh
interpreter, so every import is a first import.

It runs on the interpreter the suite runs on (a GIL build: the switch interval at its smallest, so threads
interleave as often as they can) and on a free-threaded CPython where one is found, with ``PYTHON_GIL=0``. A planted
race, a test-only guard that caches its verdict in a shared dict written without a lock, shows the test catches what
it is for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxrel.distributions import pythons

REPO = Path(__file__).resolve().parents[2]
THREADS = 8
ITERATIONS = 20

# argv: ITERATIONS, then the packages, one per thread (each imported first by its thread, then forgotten), then "--",
# then modules to forget between iterations as well. Prints {"verdicts": [[verdict, ...] per iteration], "gil": bool}.
STRESS = r"""
import json, sys, threading
iterations = int(sys.argv[1])
split = sys.argv.index("--")
packages, forget = sys.argv[2:split], sys.argv[split + 1:]
sys.setswitchinterval(1e-6)  # a GIL build hands the interpreter over as often as it can: races show
verdicts = []
for _ in range(iterations):
    barrier = threading.Barrier(len(packages))
    seen = [None] * len(packages)
    def first_import(slot):
        barrier.wait()
        try:
            seen[slot] = "accepted " + str(__import__(packages[slot]).VERDICT)
        except ImportError as error:  # the guard's refusal (GuardError is an ImportError)
            seen[slot] = "refused " + str(error).splitlines()[0]
        except BaseException as error:  # torn state: anything else
            seen[slot] = type(error).__name__ + ": " + str(error)
    workers = [threading.Thread(target=first_import, args=(slot,)) for slot in range(len(packages))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for name in [*packages, *forget]:
        sys.modules.pop(name, None)
    verdicts.append(seen)
print(json.dumps({"verdicts": verdicts, "gil": getattr(sys, "_is_gil_enabled", lambda: True)()}))
"""

RACY_GUARD = '''"""Test-only: the guard, its verdict kept in a shared dict written without a lock (planted)."""
import threading
from jaxrel.guard import check
_verdict = {}
_looked = threading.Event()
def cached_check(**arguments):
    if "found" in _verdict:
        _looked.set()
        return _verdict["found"]
    _verdict["found"] = None  # the entry exists before its verdict does: another thread can read it now
    _looked.wait(60)  # the work between (reading files) lasts until another caller has looked: no timing decides
    _verdict["found"] = check(**arguments)
    return _verdict["found"]
'''


def _site(root: Path, backend_version: str, guard: str) -> Path:
    """A site with the backend ``fakeback`` at ``backend_version`` and :data:`THREADS` consumers, each calling
    ``guard`` (``check`` or the racy ``cached_check``) at import with the range 1.0 to 2.0."""
    (root / "fakeback").mkdir(parents=True)
    (root / "fakeback" / "version.py").write_text(f'_version = "{backend_version}"\n')
    (root / f"fakeback-{backend_version}.dist-info").mkdir()
    (root / f"fakeback-{backend_version}.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: fakeback\nVersion: {backend_version}\n")
    (root / "racyguard.py").write_text(RACY_GUARD)
    source = "jaxrel.guard import check" if guard == "check" else "racyguard import cached_check"
    for slot in range(THREADS):
        (root / f"consumer{slot}").mkdir()
        (root / f"consumer{slot}" / "__init__.py").write_text(
            f"from {source}\nVERDICT = {guard}(backend='fakeback', minimum_backend='1.0', frontend='fakefront', "
            f"frontend_version='2.0', path=[{str(root)!r}])\n")
    return root


def _free_threaded() -> str | None:
    """A free-threaded CPython here, as jaxrel finds one (``--python 3.13t``): on ``PATH``, in pyenv's versions, or
    built by ``scripts/free_threaded_python.sh`` into jaxrel's cache (which ``.ci/run`` does)."""
    pythons.all_pythons.cache_clear()  # an earlier test may have asked with another cache directory or HOME
    found = [python for version, python in pythons.all_pythons().items() if pythons.free_threaded(version)]
    return found[0].executable if found else None


INTERPRETERS = [pytest.param("gil", id="gil-build"), pytest.param("free-threaded", id="free-threaded")]


def _stress(python: str, site: Path, iterations: int = ITERATIONS) -> dict[str, Any]:
    done = subprocess.run([python, "-c", STRESS, str(iterations), *(f"consumer{slot}" for slot in range(THREADS)),
                           "--", "racyguard"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "PYTHON_GIL": "0",
                               "JAXREL_SKIP_GUARD": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


def _interpreter(kind: str) -> str:
    if kind == "gil":
        return sys.executable
    found = _free_threaded()
    if found is None:
        pytest.skip("no free-threaded CPython here (python3.13t to 3.19t on PATH, in pyenv's versions or in jaxrel's "
                    "cache); build one (scripts/free_threaded_python.sh 3.13) to run this half")
    return found


@pytest.mark.parametrize("kind", INTERPRETERS)
@pytest.mark.parametrize(("backend", "expected"), [
    pytest.param("1.5", "accepted 1.5", id="accepting"),
    pytest.param("0.9", "refused fakeback is version 0.9, but fakefront 2.0 requires 1.0 <= fakeback <= 2.0 (release "
                        "numbers; rc/dev/post/local suffixes ignored).", id="refusing"),
])
def test_concurrent_first_imports_get_one_verdict(tmp_path: Path, kind: str, backend: str, expected: str) -> None:
    python = _interpreter(kind)
    answer = _stress(python, _site(tmp_path / "site", backend, "check"))
    assert answer["gil"] is (kind == "gil"), "a free-threaded run must keep the GIL off throughout"
    assert len(answer["verdicts"]) == ITERATIONS
    for iteration, seen in enumerate(answer["verdicts"]):
        assert seen == [expected] * THREADS, (iteration, seen)


@pytest.mark.parametrize("kind", INTERPRETERS)
def test_a_planted_race_in_a_guards_shared_cache_is_caught(tmp_path: Path, kind: str) -> None:
    """The test-only guard writes its cache entry before its verdict: threads that read it in between get
    ``None``, and the verdicts disagree."""
    python = _interpreter(kind)
    answer = _stress(python, _site(tmp_path / "site", "1.5", "cached_check"), iterations=5)
    torn = [seen for seen in answer["verdicts"] if len(set(seen)) > 1]
    assert torn, f"the race was not caught: {answer['verdicts']}"
    assert all(set(seen) == {"accepted 1.5", "accepted None"} for seen in torn), torn
