"""`jaxrel gates` on trees built to hang or crash it: a FIFO named like a module, expressions of
50,000 terms, a worker process that dies. Each run is a subprocess with a deadline, so a hang fails
the test instead of stalling the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel._util import parallel

GATE = "from jax._src.lib import jaxlib_extension_version\nif jaxlib_extension_version >= 5:\n    y = 1\n"
TERMS = 50_000


def tree(root: Path, files: dict[str, str]) -> Path:
    (root / "jax").mkdir(parents=True)
    (root / "jax" / "version.py").write_text('_version = "0.5.0"\n_minimum_jaxlib_version = "0.4.30"\n')
    for name, text in files.items():
        (root / "jax" / name).write_text(text)
    return root


def gates(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxrel", "gates", str(root), *options], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "JAXREL_DEBUG": ""})


@pytest.mark.parametrize("fix", [False, True], ids=["scan", "fix"])
def test_a_fifo_named_like_a_module_is_skipped_not_read(tmp_path: Path, fix: bool) -> None:
    root = tree(tmp_path / "tree", {"a.py": GATE})
    os.mkfifo(root / "jax" / "pipe.py")  # reading it would wait for a writer forever
    done = gates(root, *(["--fix"] if fix else []))
    assert done.returncode == 0, done.stderr
    if fix:
        assert "jaxlib_extension_version" not in (root / "jax" / "a.py").read_text(), "the rest was still fixed"
    else:
        assert "jax/a.py:2: always-true" in done.stdout and "pipe.py" not in done.stdout


def test_a_condition_of_50000_terms_is_judged_and_its_rewrite_refused(tmp_path: Path) -> None:
    """The scan reads it in seconds (segments cut from lines split once); the fix refuses to hand it to
    libcst, whose native parser would overflow its stack (a segfault), and says why."""
    wide = GATE.replace(">= 5:", ">= 5 and (" + " or ".join(["flag"] * TERMS) + "):")
    root = tree(tmp_path / "tree", {"wide.py": wide, "a.py": GATE})
    scanned = gates(root)
    assert scanned.returncode == 0, scanned.stderr
    assert "jax/wide.py:2: unknown" in scanned.stdout and "jax/a.py:2: always-true" in scanned.stdout
    fixed = gates(root, "--fix")
    assert fixed.returncode == 0, fixed.stderr
    assert "wide.py:line 2 is nested more than 1000 levels deep" in fixed.stderr
    assert (root / "jax" / "wide.py").read_text() == wide, "left unchanged"
    assert "jaxlib_extension_version" not in (root / "jax" / "a.py").read_text()


def test_an_expression_too_deep_for_pythons_parser_is_a_warning_naming_the_file(tmp_path: Path) -> None:
    deep = GATE.replace("y = 1", "y = jaxlib_extension_version + " + " + ".join(["1"] * TERMS))
    root = tree(tmp_path / "tree", {"deep.py": deep, "a.py": GATE})
    for options in ([], ["--fix"]):
        done = gates(root, *options)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "jax/deep.py not scanned: too deeply nested for Python's parser" in done.stderr
    assert (root / "jax" / "deep.py").read_text() == deep


def test_a_module_too_deep_for_pythons_parser_around_a_decided_gate_is_refused_not_a_crash(tmp_path: Path) -> None:
    """The gate's statement parses alone (the scan decides it), the whole module does not: the fix
    cannot check what the module binds, so it leaves the file as it was and says why."""
    deep = "x = " + " + ".join(["1"] * TERMS) + "\n" + GATE
    root = tree(tmp_path / "tree", {"deep.py": deep, "a.py": GATE})
    scanned = gates(root)
    assert scanned.returncode == 0 and "deep.py" not in scanned.stderr, scanned.stderr
    assert "jax/deep.py:3: always-true" in scanned.stdout
    fixed = gates(root, "--fix")
    assert fixed.returncode == 0 and "internal error" not in fixed.stderr, fixed.stderr
    assert "jax/deep.py:too deeply nested for Python's parser" in fixed.stderr
    assert (root / "jax" / "deep.py").read_text() == deep, "left unchanged"
    assert "jaxlib_extension_version" not in (root / "jax" / "a.py").read_text(), "the rest was still fixed"


def test_a_fifo_as_the_version_file_is_not_read(tmp_path: Path) -> None:
    root = tree(tmp_path / "tree", {"a.py": GATE})
    (root / "jax" / "version.py").unlink()
    os.mkfifo(root / "jax" / "version.py")
    missing = gates(root)
    assert missing.returncode == 2 and "no _minimum_jaxlib_version in" in missing.stderr, missing.stderr
    given = gates(root, "--min-backend", "0.4.30")
    assert given.returncode == 0 and "jax/a.py:2: always-true" in given.stdout, given.stderr


def _die_on_two(item: int) -> int:
    if item == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 10


def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    assert list(parallel.map_forked(lambda i: i * 10, [1, 2, 3], processes=2)) == [10, 20, 30]
    with pytest.raises(RuntimeError, match="a worker process died"):
        list(parallel.map_forked(_die_on_two, [1, 2, 3, 4], processes=2))
