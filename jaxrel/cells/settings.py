"""Where and how a run makes its cells' environments: one value every feature that runs cells passes down."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jaxrel.distributions.index import Index

__all__ = ["EnvSettings"]


@dataclass(frozen=True)
class EnvSettings:
    """Where and how cell environments are made."""

    workdir: Path  # environments go to WORKDIR/envs/<cell>
    index: Index | None = None  # install the backend and plugins from files verified against it (else by name)
    use_uv: bool | None = None
    exclude_newer: str | None = None  # resolve the requirements as of this time (uv only)
    bytecode: Path | None = None  # where the cells' interpreters keep compiled bytecode (see envs.Env)
    test_requirements: Path | None = None  # the frontend's test requirements, for positive cells
    plugin_install: str = "light"  # auto | full | light (jaxrel.cells.plugin_install)
    devices: frozenset[str] = frozenset()  # the plugin devices this machine has ({"cuda"}: an NVIDIA GPU)
