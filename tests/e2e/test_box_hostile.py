"""The box other people's tests run in (jaxrel.cells.box), tried by tests that misbehave and pass: a double-forked
``setsid`` daemon, a child deaf to SIGTERM and SIGINT, reading a planted secret in the real home and in the
frontend checkout's ``.git/config`` by absolute path, writing outside the run's directory, a fork bomb, allocating
past the memory limit, and connecting to a server on the host's loopback. Each runs as a library's test would
(pytest in an environment, through ``jaxrel.downstream.sandbox``). After each: no process left, no file outside,
the secret in no output, and the outcome named. The unboxed runs of the same tests show each escape happen (the
tests are not vacuous: they fail with the box turned off)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from jaxrel.cells import box
from jaxrel.downstream import sandbox

pytestmark = pytest.mark.skipif(box.unavailable() is not None, reason=f"no box here: {box.unavailable()}")

SECRET = f"planted-secret-{uuid.uuid4().hex}"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _run(tmp_path: Path, test: str, *, boxed: bool = True, limits: box.Limits | None = None,
         hidden: tuple[Path, ...] = (), offline: bool = True) -> sandbox.Sandboxed:
    """``test`` as a library's test module, run by pytest from the suite's interpreter (its environment), in a run
    directory of its own under ``tmp_path`` (unboxed and not ``offline``: as before the box, nothing contained)."""
    tests = tmp_path / "library-tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_hostile.py").write_text(test)
    run = tmp_path / "run"
    return sandbox.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_hostile.py"],
                       cwd=tests, home=run / "home", budget=120, boxed=boxed, limits=limits,
                       readable=(Path(sys.prefix),), hidden=hidden, offline=offline)


DAEMON = """
import os, time

def test_leaves_a_daemon_behind():
    if os.fork() == 0:  # the classic double fork: a session of its own, its parent gone
        os.setsid()
        if os.fork() == 0:
            os.execvp("python3", ["python3", "-c", "import time; time.sleep(300)", "MARKER"])
        os._exit(0)
    time.sleep(0.5)
"""

DEAF = """
import signal, subprocess

def test_starts_a_child_deaf_to_sigterm_and_sigint():
    subprocess.Popen(["python3", "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)", "MARKER"])
"""


@pytest.mark.parametrize("test", [DAEMON, DEAF], ids=["setsid-daemon", "deaf-child"])
def test_nothing_the_tests_start_outlives_the_run(tmp_path: Path, test: str) -> None:
    marker = f"hostile-{uuid.uuid4().hex}"
    ran = _run(tmp_path, test.replace("MARKER", marker))
    assert ran.boxed and ran.returncode == 0, ran.output[-2000:]  # the test itself passed
    deadline = time.monotonic() + 30  # the kernel ends the namespace's processes as the box's first one exits
    while (left := _processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], "a process the tests started outlived the boxed run"


def test_unboxed_the_daemon_escapes(tmp_path: Path) -> None:
    """The mutation check of the test above: without the box the double-forked daemon survives the run."""
    marker = f"hostile-{uuid.uuid4().hex}"
    ran = _run(tmp_path, DAEMON.replace("MARKER", marker), boxed=False)
    try:
        assert not ran.boxed and ran.returncode == 0, ran.output[-2000:]
        assert _processes_with(marker), "unboxed, the daemon should have escaped (is the test still hostile?)"
    finally:
        _kill(_processes_with(marker))


READER = """
def test_reads_secrets_by_absolute_path():
    for path in PATHS:
        try:
            print("READ", path, open(path).read())
        except OSError as error:
            print("NOT READ", path, type(error).__name__)
"""


@pytest.mark.parametrize("boxed", [True, False], ids=["boxed", "unboxed"])
def test_a_planted_secret_in_the_home_and_the_checkout_never_reaches_the_output(tmp_path: Path, boxed: bool) -> None:
    home_secret = Path.home() / f".jaxrel-hostile-{uuid.uuid4().hex}"
    checkout = tmp_path / "frontend-checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f'[remote "origin"]\n\turl = https://user:{SECRET}@example.invalid/x\n')
    home_secret.write_text(SECRET)
    try:
        ran = _run(tmp_path, READER.replace("PATHS", repr([str(home_secret), str(checkout / ".git" / "config")])),
                   boxed=boxed, hidden=(checkout,))
    finally:
        home_secret.unlink()
    assert ran.returncode == 0, ran.output[-2000:]
    if boxed:
        assert SECRET not in ran.output, "a secret reached the tests' output"
        assert ran.output.count("NOT READ") == 2, ran.output[-2000:]
    else:
        assert SECRET in ran.output, "unboxed, the test reads both (is the test still hostile?)"


WRITER = """
def test_writes_outside_its_directory():
    for path in PATHS:
        try:
            open(path, "w").write("escaped")
        except OSError as error:
            print("NOT WRITTEN", path, type(error).__name__)
"""


@pytest.mark.parametrize("boxed", [True, False], ids=["boxed", "unboxed"])
def test_nothing_is_written_outside_the_run_directory(tmp_path: Path, boxed: bool) -> None:
    outside = [tmp_path / "outside.txt", Path.home() / f".jaxrel-hostile-{uuid.uuid4().hex}",
               tmp_path / "library-tests" / "beside-the-tests.txt"]
    try:
        ran = _run(tmp_path, WRITER.replace("PATHS", repr([str(p) for p in outside])), boxed=boxed)
        assert ran.returncode == 0, ran.output[-2000:]
        written = [p for p in outside if p.exists()]
        if boxed:
            assert written == [], f"the boxed tests wrote {written}"
        else:
            assert len(written) == 3, "unboxed, every write lands (is the test still hostile?)"
    finally:
        for path in outside:
            path.unlink(missing_ok=True)


FORK_BOMB = """
import os, time

def test_forks_until_it_cannot():
    children = 0
    try:
        while children < 5000:
            pid = os.fork()
            if pid == 0:
                time.sleep(300)
                os._exit(0)
            children += 1
    except OSError as error:
        print("FORK FAILED after", children, type(error).__name__)
    print("FORKED", children)
"""


def test_a_fork_bomb_meets_the_process_limit_and_leaves_nothing(tmp_path: Path) -> None:
    ran = _run(tmp_path, FORK_BOMB, limits=box.Limits(memory_bytes=2 << 30, pids=128))
    assert ran.returncode == 0, ran.output[-2000:]
    assert "FORK FAILED after" in ran.output, ran.output[-2000:]
    forked = int(ran.output.split("FORKED ")[1].split()[0])
    assert forked < 128, forked


HOG = """
def test_allocates_past_the_limit():
    hog = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB, touched
    assert len(hog) == 64
"""


def test_memory_past_the_limit_is_killed_and_named(tmp_path: Path) -> None:
    ran = _run(tmp_path, HOG, limits=box.Limits(memory_bytes=256 << 20, pids=512))
    assert ran.returncode != 0 and ran.out_of_memory, (ran.returncode, ran.output[-2000:])
    assert ran.peak_bytes is not None and ran.peak_bytes <= 300 << 20


CONNECTOR = """
import socket

def test_connects_to_the_host():
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=5).sendall(b"hello from the tests")
        print("CONNECTED")
    except OSError as error:
        print("NOT CONNECTED", type(error).__name__)
"""


@pytest.mark.parametrize("boxed", [True, False], ids=["boxed", "unboxed"])
def test_the_hosts_loopback_cannot_be_reached(tmp_path: Path, boxed: bool) -> None:
    accepted: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)

        def serve() -> None:
            try:
                connection, _ = server.accept()
                with connection:
                    accepted.append(connection.recv(100))
            except OSError:
                pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        ran = _run(tmp_path, CONNECTOR.replace("PORT", str(server.getsockname()[1])), boxed=boxed, offline=boxed)
        if boxed:  # and --network: the box shares the host's network, the rest of it unchanged
            shared = _run(tmp_path, CONNECTOR.replace("PORT", str(server.getsockname()[1])), offline=False)
            assert shared.boxed and "CONNECTED" in shared.output.replace("NOT CONNECTED", ""), shared.output[-2000:]
        if boxed:
            assert ran.returncode == 0 and "NOT CONNECTED" in ran.output, ran.output[-2000:]
            thread.join(60)
            assert accepted == [b"hello from the tests"]  # the --network run's connection, and only that one
        else:
            thread.join(60)
            assert accepted == [b"hello from the tests"], "unboxed, the host's loopback is reachable (hostile?)"


def test_every_report_says_when_the_tests_ran_unboxed() -> None:
    from jaxrel.downstream import report
    from jaxrel.downstream.crater import CraterResult

    boxed, unboxed = CraterResult("dfam at HEAD", "", "0.5.0", "3.12"), CraterResult("dfam", "", "0.5.0", "3.12",
                                                                                         boxed=False)
    assert "UNBOXED" not in report.crater_text(boxed) + report.crater_markdown(boxed)
    assert "UNBOXED" in report.crater_text(unboxed) and "UNBOXED" in report.crater_markdown(unboxed)
    assert unboxed.to_json()["boxed"] is False and boxed.to_json()["boxed"] is True


def test_without_bubblewrap_the_run_is_refused_with_the_fix(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "from jaxrel.cells import box; print(box.unavailable())"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": str(tmp_path)})
    assert "bubblewrap is not installed" in done.stdout and "--unboxed" in done.stdout, done.stdout + done.stderr


def test_an_environment_under_a_hidden_path_still_runs(tmp_path: Path) -> None:
    """A virtual environment under /tmp (a clone there, a --workdir there): the box hides /tmp, and binds back the
    environment as named and the interpreter it links to. Before, bwrap found no such file (the clone of CI)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert str(venv).startswith("/tmp/") or not str(tmp_path).startswith("/tmp/")
    run = tmp_path / "run"
    ran = sandbox.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.prefix)"], cwd=tmp_path / "run",
                      home=run / "home", budget=60)
    assert ran.boxed and ran.returncode == 0 and str(venv) in ran.output, ran.output[-2000:]
