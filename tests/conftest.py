"""Shared fixtures: a fake site-packages directory built file by file.

Unit tests use it to exercise file reading offline; the integration tests use real wheels.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from hypothesis import settings

# A shell without job control starts its background commands with SIGINT ignored, and every process below inherits
# that (a CI runner's `cmd &`, `nohup … &`): Python then installs no KeyboardInterrupt handler, and jaxrel rightly
# leaves an ignored SIGINT ignored in its children. The suite tests Ctrl-C as a terminal delivers it, so its
# processes start from the default disposition whatever launched them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Site:
    """A directory laid out like site-packages."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def path(self) -> list[str]:
        return [str(self.root)]

    def write(self, relative: str, text: str) -> Path:
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def distribution(self, name: str, version: str, files: dict[str, str] | None = None) -> None:
        """A ``.dist-info`` with METADATA, plus the given package files."""
        folder = f"{name.replace('-', '_')}-{version}.dist-info"
        self.write(f"{folder}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        for relative, text in (files or {}).items():
            self.write(relative, text)

    def jax(self, version: str, minimum: str) -> None:
        self.distribution("jax", version, {
            "jax/__init__.py": "",
            "jax/version.py": f'_version = "{version}"\n_minimum_jaxlib_version = "{minimum}"\n',
        })

    def jaxlib(self, version: str, api: int = 467, ffi: tuple[int, int] = (0, 3)) -> None:
        self.distribution("jaxlib", version, {
            "jaxlib/__init__.py": "from .version import __version__\n",
            "jaxlib/version.py": f'_version = "{version}"\n_release_version: str = \'{version}\'\n',
            "jaxlib/xla_client.py": f"_version = {api}  # a change\n_ifrt_version = _xla.ifrt_version_number\n",
            "jaxlib/include/xla/ffi/api/c_api.h":
                f"#define XLA_FFI_API_MAJOR {ffi[0]}\n#define XLA_FFI_API_MINOR {ffi[1]}\n",
        })


@pytest.fixture
def site(tmp_path: Path) -> Site:
    (tmp_path / "site").mkdir()
    return Site(tmp_path / "site")


collect_ignore = ["data"]  # data: sample projects with tests of their own (splitfam)


# The generative fuzz tests (tests/unit/test_fuzz_*.py) run a bounded count in CI; `nox -s fuzz`
# loads this profile (--hypothesis-profile fuzz) and each of them runs this many examples.
settings.register_profile("fuzz", max_examples=3000, deadline=None)
# No test depends on timing: hypothesis's default 200 ms deadline per example failed test_guard_agrees_with_policy
# once on a loaded machine (265 ms on the first run of an example, 1 ms on its rerun).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


LONG = 30.0  # seconds: a test over this carries @pytest.mark.long("why") (docs/architecture.md, the suite's budget)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After ``--durations``: the tests over :data:`LONG` seconds without a ``long`` mark, each with its time (a
    fixture's first build on a cold machine shows here too). Reported, not failed: no test depends on timing."""
    over: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            duration, when = getattr(report, "duration", 0.0), getattr(report, "when", None)
            if when in ("setup", "call") and duration > LONG and "long" not in getattr(report, "keywords", {}):
                over[report.nodeid] = max(over.get(report.nodeid, 0.0), duration)
    if over:
        terminalreporter.section(f"over {LONG:.0f} s without a long mark")
        for nodeid, seconds in sorted(over.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:7.1f}s {nodeid}")


@pytest.fixture(autouse=True)
def _secrets_of_this_test_only() -> object:
    """Each ``jaxrel`` command is a process of its own, so the secrets it remembers (``remember_secret``) die with
    it; tests run many commands in one process, so each test gets back the set it started with. Without this, a
    fuzzed URL's fragment remembered in one test changed what another test's redaction printed."""
    from jaxrel._util import text

    saved = set(text._remembered)
    yield
    text._remembered.clear()
    text._remembered.update(saved)
