"""Shared by the generative fuzz tests: the example count, mutated data, and running the CLI once.

The count is bounded for CI; ``nox -s fuzz`` loads hypothesis's ``fuzz`` profile (tests/conftest.py),
and every fuzz test then runs the profile's far larger count.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from cli_deadline import run_main
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZING = settings.default.max_examples >= 500  # the `fuzz` profile is loaded (nox -s fuzz)
DEADLINE = 30  # seconds one CLI run may take: past it, a hang
EXIT_CODES = {0, 1, 2, 3}


def fuzz_settings(ci_examples: int, fuzz_examples: int | None = None) -> settings:
    """``ci_examples`` examples in CI, the ``fuzz`` profile's count under ``nox -s fuzz`` (at most
    ``fuzz_examples`` for a test whose every example costs seconds: a git repository, a server); no
    per-example timing (the CLI's own deadline is :data:`DEADLINE`)."""
    count = min(settings.default.max_examples, fuzz_examples or settings.default.max_examples)
    return settings(max_examples=count if FUZZING else ci_examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


ODD_STRINGS = ["", " ", "{", "}", "{version", "v{version}{x}", "{0}", "{version!r}", "../../../../etc/hostname",
               "/etc/hostname", "1!2.0", "banana", "x\x00y", "\u2028", "\ud7ff", "jaxlib",
               "0.10.2", "==0.1.0", "splitfam-core>=0.1.0", "splitfam-core; python_version >> '3'", "a" * 70,
               "v{version}", "f" * 40, "0" * 64, "../" * 20, "C:\\x", "*", "python", "bazel"]
HUGE_VERSION = st.just(5000).map(lambda digits: "0." + "9" * digits)  # past Python's int/str conversion limit
SCALARS_TOML = st.one_of(st.booleans(), st.integers(), st.just(5000).map(lambda digits: 10 ** digits), st.floats(),
                         st.sampled_from(ODD_STRINGS), HUGE_VERSION, st.text(max_size=20))
# JSON's encoder cannot write a 5,000-digit integer: raw_json() puts one into the text instead
SCALARS_JSON = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                         st.sampled_from(ODD_STRINGS), HUGE_VERSION, st.text(max_size=20))
RAW_JSON = st.sampled_from([b"9" * 5000, b"[" * 100_000, b"NaN", b'{"a": 1, "a": 2}', b"\xff", b"", b"{"])


def json_texts(data: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON of ``data``, sometimes with a value swapped for a 5,000-digit integer, or raw damaged text."""
    def encoded(value: Any, huge: bool) -> bytes:
        text = json.dumps(value)
        return text.replace("null", "9" * 5000, 1).encode() if huge else text.encode()

    return st.one_of(st.builds(encoded, data, st.booleans()), RAW_JSON)


def values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Any value TOML or JSON can hold: scalars, arrays and tables nested a few levels."""
    keys = st.one_of(st.sampled_from(ODD_STRINGS[:20]), st.text(max_size=8))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                        max_leaves=8)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any, scalars: st.SearchStrategy[Any]) -> Any:
    """``base`` with one to three changes: a value replaced by any value, a key removed, a key added."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        if not path:
            data = draw(values(scalars)) if draw(st.integers(0, 9)) == 0 else data
            continue
        *parents, last = path
        holder = data
        for part in parents:
            holder = holder[part]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            holder[last] = draw(values(scalars))
        elif action == "delete":
            del holder[last]
        elif isinstance(holder, dict):
            holder[draw(st.sampled_from(ODD_STRINGS[:12]))] = draw(values(scalars))
        else:
            holder.append(draw(values(scalars)))
    return data


@st.composite
def damaged_bytes(draw: st.DrawFn, text: bytes) -> bytes:
    """``text`` with bytes inserted, removed or flipped at a few places (non-UTF-8 bytes included)."""
    data = bytearray(text)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "flip", "cut"]))
        if kind == "insert":
            data[at:at] = draw(st.one_of(st.binary(max_size=8), st.sampled_from(
                [b"{", b"}", b"[", b"]", b"\"", b"\n", b"\xff", b"\x00", b"=", b"[" * 3000])))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif kind == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
    return bytes(data)


def digests(*roots: Path, skip: Sequence[Path] = ()) -> dict[str, str]:
    """sha256 of every regular file under ``roots`` but ``skip`` (what a run must leave as it was)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and path not in skip and ".git" not in path.parts:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found




def run_cli(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> tuple[int, str, str]:
    """``jaxrel ARGV`` in process under :data:`DEADLINE`: the exit code, stdout, stderr."""
    code = run_main(argv, DEADLINE)
    out, err = capsys.readouterr()
    return code, out, err


def assert_handled(argv: Sequence[str], code: int, err: str) -> None:
    """The fuzz property on one run: a defined exit code, never 70, no traceback; an error (2, 3) is one
    readable line on stderr (warnings and progress aside)."""
    shown = " ".join(str(a)[:60] for a in argv)[:200]
    assert code in EXIT_CODES, f"{shown}: exit {code}: {err[-600:]}"
    assert "Traceback" not in err and "internal error" not in err, f"{shown}: {err[-600:]}"
    if code in (2, 3):
        lines = [line for line in err.splitlines() if not line.startswith(("warning:", "listing ", "downloading "))
                 and ": warning: " not in line]
        assert len(lines) == 1 and len(lines[0]) < 1000, f"{shown}: not one readable line: {err[-1200:]!r}"
