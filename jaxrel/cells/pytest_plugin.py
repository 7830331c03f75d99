"""The pytest plugin of a compat cell's test runs (``-p jaxrel.cells.pytest_plugin``), inside the cell.

Configured by environment variables (xdist workers inherit them):

- ``JAXREL_CELL_RECORD``: a directory; every pytest process writes ``<process>.json`` there at
  the end: the file the frontend package was imported from (``JAXREL_CELL_PACKAGE``) and, from
  the main process, each test's outcome by node id with the first line of its error, and each
  collection error with its cause, and the ``user_properties`` a test recorded (the compat suite's
  ``api_state``: ``not yet``, ``removed in X → use Y``; read by the API atlas).
- ``JAXREL_CELL_ONLY``: a file of node ids (one a line); only those tests run (a module's node
  id selects the whole module). Used to rerun failures.
- ``JAXREL_CELL_SHARD``: ``I/N``; only every N-th test (by sorted node id) starting at the I-th runs.

Standard library and pytest only (and :mod:`jaxrel.cells.records`): it runs against whatever the
cell holds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxrel.cells.records import ONLY, PACKAGE, RECORD, SEVERITY, SHARD, first_error, parse_shard

__all__ = ["ONLY", "PACKAGE", "RECORD", "SHARD", "first_error", "parse_shard"]

_outcomes: dict[str, dict[str, str]] = {}
_properties: dict[str, dict[str, str]] = {}


def _selected(nodeid: str, wanted: set[str]) -> bool:
    return nodeid in wanted or any(nodeid.startswith(w + "::") for w in wanted)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = list(items)
    only = os.environ.get(ONLY)
    if only:
        wanted = {line.strip() for line in Path(only).read_text(encoding="utf-8").splitlines() if line.strip()}
        kept = [item for item in kept if _selected(item.nodeid, wanted)]
    shard = os.environ.get(SHARD)
    if shard:
        index, count = parse_shard(shard)
        ranks = {nodeid: rank for rank, nodeid in enumerate(sorted(item.nodeid for item in kept))}
        kept = [item for item in kept if ranks[item.nodeid] % count == index - 1]
    if len(kept) != len(items):
        chosen = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
        items[:] = kept


def _record(nodeid: str, outcome: str, message: str = "") -> None:
    known = _outcomes.get(nodeid)
    if known is None or SEVERITY[outcome] > SEVERITY[known["outcome"]]:
        _outcomes[nodeid] = {"outcome": outcome, "message": message}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.user_properties:
        _properties[report.nodeid] = {str(name): str(value) for name, value in report.user_properties}
    if report.passed:
        if report.when == "call":
            _record(report.nodeid, "passed")
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
        _record(report.nodeid, "skipped", "xfail" if hasattr(report, "wasxfail") else
                str(reason).removeprefix("Skipped: "))
    elif report.failed:
        _record(report.nodeid, "failed" if report.when == "call" else "error", first_error(report.longreprtext))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _record(report.nodeid or "<collection>", "error", "collection: " + first_error(report.longreprtext))


def pytest_sessionfinish(session: pytest.Session) -> None:
    directory = os.environ.get(RECORD)
    if not directory:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    module = sys.modules.get(os.environ.get(PACKAGE, ""))
    record: dict[str, Any] = {"frontend_file": getattr(module, "__file__", None)}
    if worker is None:
        record["outcomes"] = _outcomes
        record["properties"] = _properties
    path = Path(directory) / f"{worker or 'main'}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
