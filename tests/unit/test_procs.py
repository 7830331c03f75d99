"""Child processes: none outlives jaxrel, what they print is bounded, Ctrl-C at any moment is one line and 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxrel._util import procs

# a child that starts a grandchild ignoring SIGINT and SIGTERM (a build backend under uv, say), tells its pid,
# then waits; the grandchild sleeps far longer than any test
STUBBORN = """
import os, signal, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "time.sleep(300)"])
print(grandchild.pid, flush=True)
signal.signal(signal.SIGINT, signal.SIG_IGN)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not reaped yet
        return stat.read().split(") ", 1)[1][0] != "Z"


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_deadline_stops_the_whole_group_signals_ignored_or_not(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        procs.run([sys.executable, "-c", STUBBORN], timeout=2, grace=0.5)
    grandchild = int(str(raised.value.output).split()[0])
    assert _wait_gone(grandchild), "the grandchild that ignores SIGINT/SIGTERM outlived the deadline"


def test_an_interrupt_stops_the_whole_group_then_goes_on(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = STUBBORN.replace("print(grandchild.pid, flush=True)",
                              f"open({str(pid_file)!r}, 'w').write(str(grandchild.pid))")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            procs.run([sys.executable, "-c", script], grace=0.5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _wait_gone(int(pid_file.read_text()))


def test_output_is_bounded_to_its_end() -> None:
    done = procs.run([sys.executable, "-c", "import sys\nfor i in range(200000): print(i)\nprint('the end')"],
                     max_output=1000)
    assert done.returncode == 0 and len(done.stdout) <= 1000 and done.stdout.endswith("the end\n")
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        procs.run(endless, timeout=1.5, max_output=1 << 20)
    assert len(raised.value.output) <= 1 << 20


def test_a_leader_that_exits_leaves_nothing_in_its_group(tmp_path: Path) -> None:
    script = STUBBORN.replace("signal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(300)", "")
    done = procs.run([sys.executable, "-c", script])
    assert done.returncode == 0 and _wait_gone(int(done.stdout.split()[0]))


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.3, 0.6])
def test_ctrl_c_while_jaxrel_starts_is_one_line_and_130_or_the_default_action(delay: float) -> None:
    """SIGINT at any moment of start-up: either Python had no handler yet and the signal's default action ended
    the process (returncode -SIGINT, nothing printed: the Unix outcome), or jaxrel's handler ran (one line, 130),
    or the command finished first (its answer, whole). Never a traceback. Which one happens depends on the
    machine's speed; every outcome is checked, none is skipped."""
    process = subprocess.Popen([sys.executable, "-m", "jaxrel", "verdict", "jax==0.12.0", "jaxlib==0.12.0",
                                "--family", "jax"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err
    if process.returncode == -signal.SIGINT:  # before Python's handler, or after jaxrel gave it back at exit
        assert err == ""
    elif process.returncode == 0:
        assert "compatible" in out
    else:
        assert process.returncode == 130, (process.returncode, err)
        assert err.strip().splitlines() == [err.strip()] and "interrupted" in err


def test_ctrl_c_under_the_start_up_handler_is_one_line_and_130() -> None:
    """The start-up handler itself, with no race: the child installs it as ``jaxrel`` does, says so, then waits
    as a slow import would; the interrupt comes after it is in place."""
    script = ("import signal, sys\nfrom jaxrel import _entry\n"
              "signal.signal(signal.SIGINT, _entry._interrupted_while_starting)\n"
              "print('ready', flush=True)\nsys.stdin.read()\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err == "jaxrel: interrupted\n"


def test_sigterm_stops_every_child_group_and_is_one_line(tmp_path: Path) -> None:
    """SIGTERM (CI runners, ``timeout``) ends a jaxrel command the way Ctrl-C does: the child (which ignores
    SIGINT) and its grandchild (which ignores SIGINT and SIGTERM) are gone, one line, exit 130."""
    pid_file = tmp_path / "pid"
    child = STUBBORN.replace("print(grandchild.pid, flush=True)",
                             f"open({str(pid_file)!r}, 'w').write(str(grandchild.pid))")
    script = ("import sys\nfrom jaxrel import cli\nfrom jaxrel._util import procs\n"
              "def verb(args):\n    print('ready', flush=True)\n"
              f"    procs.run([sys.executable, '-c', {child!r}], grace=0.5)\n    return 0\n"
              "class Parser:\n    def parse_args(self, argv):\n"
              "        import argparse\n        return argparse.Namespace(run=verb, verb='verdict', debug=False)\n"
              "cli.build_parser = Parser\nsys.exit(cli.main([]))\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    end = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < end and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, (process.returncode, err)
    assert err == "jaxrel verdict: terminated (SIGTERM); its child processes were stopped\n"
    assert _wait_gone(int(pid_file.read_text()))


# a child that starts a daemon in a session of its own holding the child's stdout open (an nvidia-smi that starts
# nvidia-persistenced, say), prints its answer and exits: killing the child's group does not reach the daemon
DAEMON = """
import os, subprocess, sys
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
print("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)")
print(daemon.pid, flush=True)
if os.environ.get("DAEMON_PIDS"):
    with open(os.environ["DAEMON_PIDS"], "a") as pids:
        pids.write(f"{daemon.pid}\\n")
"""


def test_a_daemon_holding_the_pipe_is_not_waited_for(tmp_path: Path) -> None:
    """The answer comes back once the child exits, though its daemon keeps the pipe open for minutes."""
    start = time.monotonic()
    done = procs.run([sys.executable, "-c", DAEMON], timeout=250)
    daemon = int(done.stdout.split()[-1])
    try:
        assert done.returncode == 0 and done.stdout.startswith("GPU 0: NVIDIA H100")
        assert time.monotonic() - start < 200, "the daemon's pipe was waited for"  # it holds it for 300 s
    finally:
        os.kill(daemon, signal.SIGKILL)


def test_device_detection_answers_despite_such_a_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jaxrel.cells import hardware

    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\n{DAEMON}")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DAEMON_PIDS", str(tmp_path / "pids"))
    hardware.nvidia_gpus.cache_clear()
    try:
        assert hardware.nvidia_gpus() == ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)",)
        assert hardware.devices_here() == frozenset({"cuda"})
    finally:
        hardware.nvidia_gpus.cache_clear()
        for line in (tmp_path / "pids").read_text().split() if (tmp_path / "pids").exists() else []:
            os.kill(int(line), signal.SIGKILL)


def _blocked(status: str) -> int:
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)


def test_children_start_with_sigint_and_sigterm_deliverable() -> None:
    """Before, popen blocked both while the child started and the child inherited the mask through exec: every
    child (git bisect run, its steps, uv, pytest) ignored SIGINT and SIGTERM until SIGKILL."""
    for done in (procs.run(["cat", "/proc/self/status"]),):
        mask = _blocked(done.stdout)
        assert not mask & (1 << (signal.SIGINT - 1)) and not mask & (1 << (signal.SIGTERM - 1)), hex(mask)
    process = procs.popen(["cat", "/proc/self/status"], stdout=subprocess.PIPE, text=True)
    assert not _blocked(process.communicate()[0]) & (1 << (signal.SIGINT - 1))


class _InterruptedWhileStarting(subprocess.Popen):  # type: ignore[type-arg]
    """A Popen that gets Ctrl-C right after the child is forked, before Popen returns it."""

    started: list[subprocess.Popen] = []  # type: ignore[type-arg]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        _InterruptedWhileStarting.started.append(self)
        signal.raise_signal(signal.SIGINT)


def test_ctrl_c_while_a_child_starts_stops_it_and_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs.subprocess, "Popen", _InterruptedWhileStarting)
    _InterruptedWhileStarting.started.clear()
    with pytest.raises(KeyboardInterrupt):
        procs.popen(["sleep", "60"])
    (child,) = _InterruptedWhileStarting.started
    assert child.poll() is not None, "the child went with the interrupt"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored_while_a_child_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs.subprocess, "Popen", _InterruptedWhileStarting)
    _InterruptedWhileStarting.started.clear()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process = procs.popen(["sleep", "60"])
        assert process.poll() is None
        procs.stop(process)
    finally:
        signal.signal(signal.SIGINT, previous)


HOLDER = Path(__file__).resolve().parents[1] / "interrupt_holder.py"
# a jaxrel command whose verb waits on two children at once, as bisect's builds do: one from the main thread, one
# from a worker of a pool the main thread joins on its way out (the pool's `with` waits for the worker)
POOLED_VERB = """
import sys
from concurrent.futures import ThreadPoolExecutor
from jaxrel import cli
from jaxrel._util import procs
HOLDER, KIND, WHERE = sys.argv[1:4]
def verb(args):
    with ThreadPoolExecutor(2) as pool:
        other = pool.submit(procs.run, [sys.executable, HOLDER, KIND, WHERE])
        procs.run([sys.executable, HOLDER, KIND, WHERE])
        other.result()
    return 0
class Parser:
    def parse_args(self, argv):
        import argparse
        return argparse.Namespace(run=verb, verb='bisect', debug=False)
cli.build_parser = Parser
from jaxrel import _entry
sys.argv = ['jaxrel']
_entry.main()
"""


def _held(where: Path, count: int, process: subprocess.Popen[str]) -> list[int]:
    """Wait until ``count`` holders hold (each says so; no sleep decides anything), then their pids."""
    deadline = time.monotonic() + 120
    while len(list(where.glob("held-*"))) < count:
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the holders never started"
        time.sleep(0.02)
    return [int(line) for line in (where / "pids").read_text().split()]


@pytest.mark.parametrize("route", ["group", "jaxrel alone"])
@pytest.mark.parametrize("kind", ["honours", "ignores", "own-session"])
def test_ctrl_c_stops_every_child_of_every_thread_and_exits_130(tmp_path: Path, kind: str, route: str) -> None:
    """Ctrl-C while children run from the main thread and from a pool's worker. Before, only the main thread's
    child was stopped: the pool's `with` waited for its worker's child for ever, and a child that started a process
    in a session of its own left it running. Now every child's group and every process below jaxrel get SIGINT,
    then SIGKILL after the grace; exit 130, one line, nothing left."""
    process = subprocess.Popen([sys.executable, "-c", POOLED_VERB, str(HOLDER), kind, str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                                    "JAXREL_STOP_GRACE": "0.5"})
    pids = _held(tmp_path, 2, process)
    if route == "group":  # as a terminal sends it: to jaxrel's process group
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)  # before: never (the pool waited on a child nobody stopped)
    assert process.returncode == 130, (process.returncode, err)
    assert err == "jaxrel bisect: interrupted\n"
    left = [pid for pid in pids if not _wait_gone(pid, 30.0)]
    assert left == [], f"still running after jaxrel exited: {left}"


def test_nothing_starts_once_stopping_and_a_stopped_child_is_no_answer(tmp_path: Path) -> None:
    """After an interrupt another thread took, a worker that goes on gets KeyboardInterrupt, not a new child nor
    the killed child's output to read as its result (a build "failed", cached as such)."""
    script = ("import sys, threading\nfrom jaxrel._util import procs\n"
              "answers = []\n"
              "def worker():\n"
              "    try:\n"
              f"        procs.run([sys.executable, {str(HOLDER)!r}, 'ignores', {str(tmp_path)!r}])\n"
              "        answers.append('a result')\n"
              "    except KeyboardInterrupt:\n"
              "        answers.append('interrupted')\n"
              "    try:\n"
              "        procs.run(['true'])\n"
              "        answers.append('started another')\n"
              "    except KeyboardInterrupt:\n"
              "        answers.append('refused')\n"
              "thread = threading.Thread(target=worker)\nthread.start()\n"
              "import time, pathlib\n"
              f"while not list(pathlib.Path({str(tmp_path)!r}).glob('held-*')): time.sleep(0.02)\n"
              "procs.stop_all(grace=0.5)\nthread.join()\nprocs.finish_stopping()\nprint(' '.join(answers))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.stdout.strip() == "interrupted refused", done.stderr[-2000:]
    (pid,) = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert _wait_gone(pid)


@pytest.mark.parametrize(("text", "grace"), [(None, 3.0), ("0.5", 0.5), ("0", 0.0), ("-1", 3.0), ("61", 3.0),
                                             ("soon", 3.0), ("nan", 3.0)])
def test_the_grace_is_three_seconds_unless_a_sane_one_is_set(text: str | None, grace: float) -> None:
    assert procs._grace(text) == grace


def test_every_phase_is_named_and_the_holder_goes_where_its_phase_starts_a_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(name.count(".") == 1 and text for name, text in procs.PHASES.items())
    monkeypatch.setenv(procs.HOLD, "compat.cell=echo held:")
    assert procs.run(["echo", "plain"]).stdout == "plain\n"  # outside the phase: the command as it was
    with procs.phase("compat.cell"):
        assert procs.run(["echo", "inside"]).stdout == "held: echo inside\n"
    with procs.phase("downstream.bisection"), procs.phase("bisect.build"):  # a phase inside another: both hold
        monkeypatch.setenv(procs.HOLD, "downstream.bisection=echo held:")
        assert procs.run(["echo", "nested"]).stdout == "held: echo nested\n"
    with pytest.raises(AssertionError):
        with procs.phase("no.such-phase"):
            pass
