"""Running other people's code: a library's tests in a process group of their own, with a private HOME and TMP,
an environment that holds no credential, a time budget and capped output, and no network where the machine allows.

What is isolated: the environment (only the variables in :data:`KEPT`, and jax's and XLA's own settings, pass;
tokens, index passwords and cloud keys never reach the tests), the home and temporary directories (fresh, inside
the run's work directory, removed after), the process tree (its own session: at the budget or on Ctrl-C the whole
group is killed, nothing left running), the output (the last 4 MiB of each stream kept), and, as root where
``unshare --net`` works, the network (a namespace with loopback only). What is not: the file system (the tests run
as this user and could read what this user can), CPU and memory (no cgroup limits), and the network when not root.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util import procs

__all__ = ["KEPT", "Sandboxed", "network_isolation", "run", "scrubbed_environment"]

KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SOURCE_DATE_EPOCH", "PYTHONHASHSEED")
KEPT_PREFIXES = ("JAX_", "XLA_", "TF_CPP_")  # the backend's own settings (a user's XLA_FLAGS, say)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$|^AWS_|^GOOGLE_|^AZURE_", re.IGNORECASE)


@dataclass(frozen=True)
class Sandboxed:
    """How a sandboxed command ended."""

    returncode: int | None  # None: killed at the budget
    output: str
    seconds: float
    timed_out: bool = False
    network_isolated: bool = False


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """The command prefix that runs a command without network (``unshare --net``, loopback brought up), or ``()``
    where this machine does not allow it (not root, no ``unshare``, a container without the capability)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return ()
    try:
        done = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    ip = shutil.which("ip")
    lo = f"{ip} link set lo up 2>/dev/null; " if ip else ""
    return (unshare, "--net", "--", "sh", "-c", f'{lo}exec "$@"', "sandbox")


def scrubbed_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a library's tests get: :data:`KEPT` and jax's settings from this one (never a variable whose
    name says it holds a secret), a private ``HOME`` and ``TMPDIR`` under ``home``, and ``extra``."""
    kept = {key: value for key, value in os.environ.items()
            if (key in KEPT or key.startswith(KEPT_PREFIXES)) and not SECRET_NAME.search(key)}
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    private = {"HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
               "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_DATA_HOME": str(home / ".local" / "share"), "PYTHONDONTWRITEBYTECODE": "1",
               "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"}
    return {**kept, **private, **dict(extra or {})}


def run(command: Sequence[str], *, cwd: Path, home: Path, env: Mapping[str, str] | None = None,
        budget: float, offline: bool = True) -> Sandboxed:
    """Run ``command`` sandboxed for at most ``budget`` seconds; ``home`` (made fresh) is its private home."""
    if home.exists():
        shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    prefix = network_isolation() if offline else ()
    start = time.perf_counter()
    try:
        done = procs.run([*prefix, *command], cwd=cwd, env=scrubbed_environment(home, env), timeout=budget)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout if isinstance(expired.stdout, str) else ""
        err = expired.stderr if isinstance(expired.stderr, str) else ""
        return Sandboxed(None, out + err, time.perf_counter() - start, True, bool(prefix))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return Sandboxed(done.returncode, done.stdout + "\n" + done.stderr, time.perf_counter() - start, False,
                     bool(prefix))
