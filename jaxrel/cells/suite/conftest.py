"""The compat suite's setup: eight host CPU devices, the ``needs`` and ``isolated`` markers.

The suite runs in an environment holding one jax, one jaxlib (sometimes plugins),
pytest and jaxrel (installed ``--no-deps``): only ``jaxrel.gating``/``jaxrel.guard``
(standard library) may be imported from jaxrel.

A test declares what it needs; an unmet need is a skip whose reason names it and
what is installed, never a failure::

    @pytest.mark.needs("jax.shard_map", jax="0.6.1")          # distribution >= release
    @pytest.mark.needs(jaxlib_extension_version=270)          # API number >= N
    @pytest.mark.needs(jax_cuda12_plugin="0")                 # installed, any release

Keywords naming an API number of ``jaxrel.gating.API_GATES`` are API numbers; other
keywords are distributions (``_`` read as ``-``). The optional positional argument
names the feature in the skip reason. The thresholds are measured from the released
wheels (see each test).

A need has another end: ``until=`` (a jax release) and ``replaced_by=`` (what to use
instead) mark a removal::

    @pytest.mark.needs("jax.lax.pvary", jax="0.6.0", until="0.10.0", replaced_by="jax.lax.pcast")

From ``until`` on the test still runs; its ``removed`` fixture is then a :class:`Removal` and
the test asserts that the old name fails and the replacement works.

Both ends are judged as PEP 440 orders the installed jax: a pre-release or dev build of X
(``0.7.0.dev20250625``, ``0.7.0rc1``) comes before X, and jax adds and removes APIs during X's
cycle, not at its start. There a removal declared for X is *due*, not required: an old name that
still works is a note (``note``: "removed in 0.7.0: still present in 0.7.0.dev…"), never a failure.
Likewise a need met only by such a build (``needs(jax="0.7.0")`` on ``0.7.0.dev…``) is provisional:
a failure there is a skip with a note, not a failure. Only the version string moved; nothing broke.

Each test records what it showed in its ``user_properties`` (``api_state``: ``not yet`` for an unmet need,
``removed in X → use Y``; ``since`` and ``replaced_by`` as declared), which the cell plugin keeps
for the API atlas. ``replaced_by`` without ``until`` names the successor of an API that still works.

``@pytest.mark.isolated`` runs a test in a fresh interpreter: an exception inside some jax
callbacks (GSPMD's ``infer_sharding_from_operands``) aborts the process, which would end the
whole run; isolated, it fails that test alone with the signal named. The isolated tests of a
module share a child interpreter until one aborts it (:class:`IsolatedModule`); the first child of
each module starts when collection ends, so its own start and ``import jax`` overlap the tests that
run before it. The child ignores ``xfail``
(``--runxfail``), so the parent sees the child's real outcome and applies the marker itself.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

# Before anything imports jax: eight CPU devices for the sharding tests. JAX_PLATFORMS is left
# alone, so a GPU is used where there is one.
os.environ["XLA_FLAGS"] = " ".join(
    filter(None, [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"])
)

import pytest  # noqa: E402

from jaxrel import gating  # noqa: E402

MARKER = "needs([feature], **minimums): skip unless the environment has these releases / API numbers"
ISOLATED = "isolated: run the test in its own interpreter (it may abort the process)"
REMOVAL_KEYWORDS = ("until", "replaced_by")
CHILD = "JAXREL_SUITE_ISOLATED_CHILD"  # set in the interpreter an isolated test runs in
CHILD_LOG = "JAXREL_SUITE_ISOLATED_LOG"  # where that interpreter logs each test's start and outcome
RAISED = re.compile(r"^[\w.]*(Error|Exception|Failed)\b[^:]*: ")  # "AttributeError: ...", "test.InferFailed: ..."


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    config.addinivalue_line("markers", ISOLATED)


def pytest_report_header(config: pytest.Config) -> str:
    found = {name: gating.installed_version(name) for name in ("jax", "jaxlib")}
    return "compat suite: " + ", ".join(f"{name} {version or 'not installed'}" for name, version in found.items())


@dataclass(frozen=True)
class Removal:
    """An API the installed jax no longer has (``until`` reached), and what replaces it."""

    api: str
    version: str  # the jax release it is gone from
    replaced_by: str | None
    installed: str  # the installed jax
    due: bool = False  # the installed jax is a pre-release of ``version``: the removal may not have landed yet

    def note(self) -> str:
        return f"removed in {self.version}" + (f" → use {self.replaced_by}" if self.replaced_by else "")

    def gone(self, item: pytest.Item) -> None:
        """The old name failed as documented: a due removal has landed (the atlas reads it as removed)."""
        if self.due:
            item.user_properties.append(("api_state", self.note()))

    def still_works(self, item: pytest.Item) -> None:
        """The old name still works: a note on a pre-release of the removing release, else the test fails."""
        if not self.due:
            pytest.fail(f"{self.api} still works in jax {self.installed}, documented as {self.note()}")
        item.user_properties.append(("note", f"{self.api} removed in {self.version}: still present in "
                                             f"{self.installed} (a pre-release of it: due, not yet required)"))


def unmet_need(marker: pytest.Mark) -> str | None:
    """The skip reason for one ``needs`` marker, ``None`` when the environment meets it."""
    kwargs = {name: v for name, v in marker.kwargs.items() if name not in REMOVAL_KEYWORDS}
    releases = {name.replace("_", "-"): str(v) for name, v in kwargs.items() if name not in gating.API_GATES}
    api = {name: int(v) for name, v in kwargs.items() if name in gating.API_GATES}
    reason = gating.unmet(releases, api)
    return f"{marker.args[0]}: {reason}" if reason and marker.args else reason


def removal(marker: pytest.Mark) -> Removal | None:
    """The removal a ``needs(..., until=V)`` marker declares, when the installed jax is at or past ``V``."""
    until = marker.kwargs.get("until")
    installed = gating.installed_version("jax")
    if until is None or installed is None:
        return None
    if gating.release_of(installed).key < gating.release_of(str(until), what="needs(until=)").key:
        return None
    feature = marker.args[0] if marker.args else "this API"
    return Removal(feature, str(until), marker.kwargs.get("replaced_by"), installed,
                   due=gating.pre_release_of(installed, str(until)))


def provisional_need(marker: pytest.Mark) -> str | None:
    """Why a met ``needs`` marker is met only provisionally: a distribution's installed version is a pre-release of
    the release it needs (the API may land later in that cycle); ``None`` otherwise."""
    for name, minimum in marker.kwargs.items():
        if name in REMOVAL_KEYWORDS or name in gating.API_GATES:
            continue
        distribution = name.replace("_", "-")
        installed = gating.installed_version(distribution)
        if installed is not None and gating.pre_release_of(installed, str(minimum)):
            feature = marker.args[0] if marker.args else "this API"
            return f"{feature}: documented from {distribution} {minimum}; {installed} is a pre-release of it"
    return None


def removal_of(item: pytest.Item) -> Removal | None:
    return next((found for marker in item.iter_markers("needs") if (found := removal(marker))), None)


ISOLATED_MODULES = pytest.StashKey[dict[str, "IsolatedModule"]]()
PROVISIONAL = pytest.StashKey[str]()  # why a test's needs are met only by a pre-release


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A test whose needs only a pre-release meets (:func:`provisional_need`) and that fails is a skip with a note:
    the API may land later in that release's cycle."""
    outcome = yield
    report = outcome.get_result()
    why = item.stash.get(PROVISIONAL, None)
    if why is None or call.when != "call" or not report.failed:
        return
    crash = getattr(report.longrepr, "reprcrash", None)
    error = str(getattr(crash, "message", None) or (report.longreprtext.strip().splitlines() or [""])[-1])
    error = " ".join(error.split())[:200]
    note = f"{why}: not there yet ({error})"
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {note}")
    item.user_properties.append(("note", note))  # the teardown's report carries it too (its properties are kept)
    if report.user_properties is not item.user_properties:
        report.user_properties.append(("note", note))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, IsolatedModule] = config.stash.setdefault(ISOLATED_MODULES, {})
    for item in items:
        reasons = [reason for marker in item.iter_markers("needs") if (reason := unmet_need(marker))]
        successors = [m.kwargs["replaced_by"] for m in item.iter_markers("needs") if m.kwargs.get("replaced_by")]
        if successors:
            item.user_properties.append(("replaced_by", successors[0]))
        since = [str(m.kwargs["jax"]) for m in item.iter_markers("needs") if m.kwargs.get("jax")]
        if since:
            item.user_properties.append(("since", since[0]))
        if reasons:
            item.user_properties.append(("api_state", "not yet"))
            item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))
        elif (found := removal_of(item)) and not found.due:  # a due removal is recorded by the test, as it finds it
            item.user_properties.append(("api_state", found.note()))
        if not reasons and (provisional := [why for m in item.iter_markers("needs") if (why := provisional_need(m))]):
            item.stash[PROVISIONAL] = "; ".join(provisional)
        if not reasons and item.get_closest_marker("isolated") is not None and not os.environ.get(CHILD):
            module = modules.setdefault(str(item.path), IsolatedModule())
            module.items.append(item)
            item.runtest = functools.partial(run_isolated, item, module)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start each module's first child for its isolated tests still selected (after ``-k``, a shard, a rerun list)."""
    selected = {id(item) for item in session.items}
    for module in session.config.stash.get(ISOLATED_MODULES, {}).values():
        pending = [item for item in module.items if id(item) in selected]
        if pending:
            module.start(pending)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A child still running (the run stopped early: ``-x``, an interrupt) is ended, not left behind."""
    for module in session.config.stash.get(ISOLATED_MODULES, {}).values():
        module.stop()


@pytest.fixture
def removed(request: pytest.FixtureRequest) -> Removal | None:
    """The removal this test's ``needs(until=...)`` declares, if the installed jax is past it; else ``None``."""
    return removal_of(request.node)


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class IsolatedModule:
    """The isolated tests of one module, run in as few child interpreters as aborts allow.

    A child runs every test of the module still without a result, in order, and logs each test's
    start and outcome to a file as it goes. When it aborts, the test it had started without finishing
    is the one that aborted it; the tests after that run in the next child, when their turn comes.
    """

    def __init__(self) -> None:
        self.items: list[pytest.Item] = []
        self.results: dict[str, tuple[str, str]] = {}  # node id -> (passed | failed | skipped, message)
        self.running: tuple[subprocess.Popen[bytes], str, list[pytest.Item]] | None = None  # child, scratch, tests

    def result(self, item: pytest.Item) -> tuple[str, str]:
        if item.nodeid not in self.results and self.running is not None:
            self.finish()
        if item.nodeid not in self.results:
            selected = {id(i) for i in item.session.items}  # after deselection (-k, a shard, a rerun list)
            later = self.items[self.items.index(item):]
            self.start([i for i in later if i.nodeid not in self.results and id(i) in selected])
            self.finish()
        return self.results[item.nodeid]

    def start(self, pending: list[pytest.Item]) -> None:
        """Start a child running ``pending`` in order (its output and log go to a scratch directory)."""
        config = pending[0].config
        scratch = tempfile.mkdtemp(prefix="jaxrel-isolated-")
        command = [sys.executable, "-m", "pytest", *(i.nodeid for i in pending), "-q", "-s", "--runxfail",
                   "-p", "no:cacheprovider", "--rootdir", str(config.rootpath)]
        if config.inipath is not None:
            command += ["-c", str(config.inipath)]
        with open(os.path.join(scratch, "output.txt"), "wb") as output:
            child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=str(config.rootpath),
                                     env={**os.environ, CHILD: "1", CHILD_LOG: os.path.join(scratch, "log.jsonl")})
        self.running = (child, scratch, pending)

    def stop(self) -> None:
        if self.running is not None:
            child, scratch, _ = self.running
            self.running = None
            if child.poll() is None:
                child.kill()
            child.wait()
            shutil.rmtree(scratch, ignore_errors=True)

    def finish(self) -> None:
        """Wait for the running child (at most 600 s) and take its tests' outcomes."""
        assert self.running is not None
        child, scratch, pending = self.running
        try:
            returncode = child.wait(timeout=600)
            log = os.path.join(scratch, "log.jsonl")
            events = []
            if os.path.exists(log):
                with open(log, encoding="utf-8") as handle:
                    events = [json.loads(line) for line in handle if line.strip()]
            with open(os.path.join(scratch, "output.txt"), encoding="utf-8", errors="replace") as handle:
                output = handle.read()
        finally:
            self.stop()
        started = [e["nodeid"] for e in events if e["event"] == "start"]
        for event in events:
            if event["event"] == "outcome":
                self.results[event["nodeid"]] = (event["outcome"], event["message"])
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        unfinished = [nodeid for nodeid in started if nodeid not in self.results]
        if returncode < 0:
            raised = [line for line in lines if RAISED.match(line)]
            why = (f"the interpreter aborted ({signal_name(returncode)})"
                   + (f" after {raised[-1]}" if raised else f"; last output: {lines[-1] if lines else ''}"))
            self.results[(unfinished or [pending[0].nodeid])[0]] = ("failed", why)
        elif pending[0].nodeid not in self.results:  # the child ended without running it
            self.results[pending[0].nodeid] = ("failed", f"isolated run exited {returncode} without a result: "
                                                         f"{lines[-1] if lines else 'no output'}")


def run_isolated(item: pytest.Item, module: IsolatedModule) -> None:
    """The outcome of ``item`` as its child interpreter saw it."""
    outcome, message = module.result(item)
    if outcome == "skipped":
        pytest.skip(message)
    if outcome != "passed":
        raise AssertionError(message)


def _child_log(event: dict[str, str]) -> None:
    with open(os.environ[CHILD_LOG], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    if os.environ.get(CHILD_LOG):
        _child_log({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In a child: log each isolated test's outcome as soon as it is known (the child may abort next)."""
    if not os.environ.get(CHILD_LOG):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            outcome, message = "skipped", str(reason).removeprefix("Skipped: ")
        elif report.failed:
            errors = [line[1:].strip() for line in report.longreprtext.splitlines() if line.startswith("E ")]
            outcome, message = "failed", errors[0] if errors else report.longreprtext.strip()[-300:]
        else:
            outcome, message = "passed", ""
        _child_log({"event": "outcome", "nodeid": report.nodeid, "outcome": outcome, "message": message})


@pytest.fixture(scope="session")
def cpu_mesh():
    """A one-axis (``"i"``) mesh of 8 CPU devices (4 if only 4 are available)."""
    import jax
    import numpy as np

    devices = jax.devices("cpu")
    if len(devices) < 4:
        pytest.skip(f"needs 4 CPU devices (XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}); jax.devices('cpu') = {devices}")
    return jax.sharding.Mesh(np.array(devices[: 8 if len(devices) >= 8 else 4]), ("i",))
