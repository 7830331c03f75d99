"""How ``jaxrel compat`` runs its cells: where, which suites, how many at once, from which index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from jaxrel._util.progress import Progress, say
from jaxrel.cells.hardware import devices_here
from jaxrel.cells.owntests import OwnTests
from jaxrel.cells.settings import EnvSettings
from jaxrel.cells.suites import DEFAULT_SUITE, Suite, compat_suite
from jaxrel.compat.result import CellResult
from jaxrel.distributions.index import Index

__all__ = ["Options"]


@dataclass
class Options:
    """How to run the cells. Paths are made absolute: the suites run with other working directories."""

    workdir: Path
    suite: Path | None = DEFAULT_SUITE  # None: no compat suite (a family other than jax, without --suite)
    own: OwnTests | None = None  # the frontend's own tests, staged
    shard: str | None = None  # "I/N": run every N-th test of each suite
    jobs: int | None = None  # pytest-xdist workers for the own tests; None: one per core when the cell has xdist
    use_uv: bool | None = None
    extensions: bool = True  # build the workspace's Bazel wheels (e.g. an XLA FFI extension) and add them to cells
    workspace: Path | None = None  # the user's Bazel workspace (None: none, extensions are skipped with a reason)
    bazel_options: tuple[str, ...] = ()  # how its wheels are built (the CLI's default: as the release builds them)
    extension_dir: Path | None = None  # wheels built beforehand (e.g. by the release's build), used instead of Bazel
    index: Index | None = None  # install the backend and plugins from files verified against it (else by name)
    progress: Progress = field(default=say)
    checkpoint: Callable[[list[CellResult]], None] | None = None  # after each cell: the results so far
    cells_at_once: int | None = None  # cells run side by side; None: see cells_at_once()
    exclude_newer: str | None = None  # resolve the environments' requirements as of this time (uv only)
    test_env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE: set for every suite's pytest run
    full_plugin_cells: bool = False  # the whole suite in plugin cells without their device too (see cpu_twins)
    plugin_install: str = "auto"  # auto | full | light: what plugin cells install (jaxrel.cells.plugin_install)
    keep_bytecode: bool = True  # False: the cells' interpreters write bytecode as the caller's environment says
    compile_cache: bool = True  # the compat suite keeps XLA's compiled programs per backend build (compile_cache)

    def __post_init__(self) -> None:
        self.workdir = self.workdir.absolute()
        self.suite = self.suite.absolute() if self.suite is not None else None
        self.extension_dir = self.extension_dir.absolute() if self.extension_dir is not None else None

    @property
    def bytecode(self) -> Path | None:
        """Where the cells' interpreters keep compiled bytecode from run to run (see :class:`envs.Env`)."""
        return self.workdir / "pycache" if self.keep_bytecode else None

    def compat_suite(self) -> Suite | None:
        """The compat suite (run in the cell's driver interpreter, after the guard and the import)."""
        return compat_suite(self.suite, self.test_env) if self.suite is not None else None

    def environment_settings(self) -> EnvSettings:
        """How the cells' environments are made."""
        return EnvSettings(self.workdir, self.index, self.use_uv, self.exclude_newer, self.bytecode,
                           self.own.requirements if self.own is not None else None, self.plugin_install,
                           devices_here() if self.plugin_install == "auto" else frozenset())

    def suites(self) -> list[Suite]:
        """What a positive cell runs: the compat suite, then the frontend's own tests."""
        found = [suite] if (suite := self.compat_suite()) is not None else []
        if self.own is not None:
            found.append(replace(self.own.suite, env=self.test_env) if self.test_env else self.own.suite)
        return found
