"""A bisection's step configuration and records: what ``git bisect run``'s step processes read (``step.json``)
and what each of them leaves (a line of ``steps.jsonl``), written by jaxrel and read back without trust."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles
from jaxrel._util.atomic import write_atomically
from jaxrel.bisect.git import Source
from jaxrel.distributions.pipconfig import PipIndexConfig
from jaxrel.errors import BadInput

__all__ = ["StepConfig", "StepRecord", "append", "read_records", "rewrite"]


@dataclass(frozen=True)
class StepConfig:
    """Everything a step needs, saved as JSON for the step processes ``git bisect run`` starts."""

    git_dir: str  # the private bare clone
    subdir: str  # the frontend's directory in the repository ("" at the top)
    family: str | None  # --family as given (None: the default profile)
    workdir: str
    env_root: str  # the cell's environment, built once
    python: str  # the cell's interpreter (builds use it, so the revision's requires-python holds)
    cell: str  # the cell's id
    backend: str  # "name version" as reports say it
    tests: tuple[str, ...]  # paths and node ids, relative to the frontend's directory
    keyword: str | None = None  # -k
    test_env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE
    reruns: int = 1
    use_uv: bool = True
    index: dict[str, Any] | None = None  # the sources (--index-url, --wheelhouse) as PipIndexConfig fields
    suite_tests: tuple[str, ...] = ()  # node ids of jaxrel's compat suite, run instead of the frontend's own
    tests_root: str = ""  # a directory of a library's tests, run instead of the frontend's own (downstream)
    pytest_options: tuple[str, ...] = ()  # more pytest options for those (--import-mode=importlib)
    build_env: str = ""  # an environment holding build_requires: revisions declaring exactly those build in it
    build_requires: tuple[str, ...] = ()  # [build-system] requires of the bad revision
    boxed: bool = False  # the tests run in the box (cells.box): another project's tests
    hidden: tuple[str, ...] = ()  # with ``boxed``: paths the tests must not see
    more_envs: tuple[tuple[str, str], ...] = ()  # (backend version, environment) for revisions refusing ``backend``

    @property
    def pip_index(self) -> PipIndexConfig | None:
        """Where builds and installs get packages (``None``: pip's configuration)."""
        if self.index is None:
            return None
        fields = {key: tuple(value) if isinstance(value, list) else value for key, value in self.index.items()}
        return PipIndexConfig(**fields)  # type: ignore[arg-type]  # written from asdict(PipIndexConfig)

    @property
    def source(self) -> Source:
        return Source(Path(self.git_dir), self.subdir)

    @property
    def records(self) -> Path:
        return Path(self.workdir) / "steps.jsonl"

    @property
    def backend_version(self) -> str:
        """The cell's backend version (``backend`` is "name version")."""
        return self.backend.rsplit(" ", 1)[-1]

    @property
    def env_roots(self) -> tuple[str, ...]:
        """Every environment a step may test in: the cell's, then one for each of ``more_envs``."""
        return (self.env_root, *(root for _, root in self.more_envs))

    def env_of(self, slot: int, root: str | None = None) -> Path:
        """The environment probe slot ``slot`` tests in: ``root`` (default the cell's own) in slot 0, or its copy
        for that slot."""
        base = root or self.env_root
        return Path(base if slot == 0 else f"{base}-{slot}")

    def bytecode_of(self, slot: int) -> Path:
        """Where probe slot ``slot``'s processes keep compiled bytecode (``PYTHONPYCACHEPREFIX``): outside the
        environment, so it outlives each reinstall of the frontend (see :func:`jaxrel.bisect.step.precompile`)."""
        return Path(self.workdir) / "pycache" / f"slot{slot}"

    def work_of(self, slot: int) -> Path:
        """Probe slot ``slot``'s scratch directory."""
        return Path(self.workdir) / ("step" if slot == 0 else f"step-{slot}")

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> StepConfig:
        data = localfiles.load_json(path, what="the bisect step's configuration")
        data["tests"] = tuple(data["tests"])
        data["suite_tests"] = tuple(data.get("suite_tests", ()))
        data["pytest_options"] = tuple(data.get("pytest_options", ()))
        data["build_requires"] = tuple(data.get("build_requires", ()))
        data["hidden"] = tuple(data.get("hidden", ()))
        data["more_envs"] = tuple(tuple(pair) for pair in data.get("more_envs", ()))
        data["test_env"] = tuple(tuple(pair) for pair in data["test_env"])
        return cls(**data)


@dataclass
class StepRecord:
    """One revision tested: its verdict, why, what failed, and where the time went."""

    commit: str
    subject: str
    verdict: str  # good | bad | skip
    reason: str
    role: str = "step"  # "step" (git bisect chose it), "endpoint" (--good/--bad checked first), "parent"
    failing: list[str] = field(default_factory=list)  # node ids failing on every run
    first_error: str = ""  # the first line of the first failure's message
    flaky: list[str] = field(default_factory=list)  # node ids that failed, then passed on a rerun
    passed: int = 0
    cached: bool = False  # the wheel came from the cache (nothing built)
    backend: str = ""  # the backend version the step ran with (a revision refusing the cell's takes another)
    seconds: dict[str, float] = field(default_factory=dict)  # export, build+install, tests

    @property
    def short(self) -> str:
        return self.commit[:12]

    def line(self) -> str:
        """One progress line."""
        times = " · ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        return f"{self.short} {self.verdict}: {self.reason} · {times}"


def append(config: StepConfig, record: StepRecord) -> None:
    """Add ``record`` to the run's ``steps.jsonl``: one line in one ``write`` to a file opened for appending, so
    the steps of one multisection round, finishing together, never interleave their lines."""
    handle = os.open(config.records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, (json.dumps(asdict(record)) + "\n").encode("utf-8"))
    finally:
        os.close(handle)


def rewrite(config: StepConfig, records: list[StepRecord]) -> None:
    """Replace the run's ``steps.jsonl`` with ``records``, at once (a crash leaves the old file or the new)."""
    write_atomically(config.records, "".join(json.dumps(asdict(record)) + "\n" for record in records))


def read_records(path: Path) -> list[StepRecord]:
    """Every record in a ``steps.jsonl``."""
    if not path.is_file():
        return []
    records = []
    for line in localfiles.read_text(path).splitlines():
        try:  # jaxrel's own records, never trusted: a damaged line (a step killed mid-write) is dropped
            records.append(StepRecord(**localfiles.loads_json(line, str(path))))
        except (BadInput, TypeError):
            continue
    return records
