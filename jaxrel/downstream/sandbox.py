"""Running a library's tests: in the box (:mod:`jaxrel.cells.box`: bubblewrap, its own PID and network namespaces,
a read-only root, private home and temporary directories, only the run's directory writable, cgroup limits), with
an environment that holds no credential, a time budget and capped output.

Unboxed (``--unboxed``, said in every report) a run still gets the scrubbed environment, a process group of its
own and, as root where ``unshare --net`` works, no network; the file system, memory and what it leaves running in
a session of its own are then not contained.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from jaxrel.cells import box
from jaxrel.cells.box import KEPT, scrubbed_environment

__all__ = ["KEPT", "Sandboxed", "network_isolation", "run", "scrubbed_environment"]


Sandboxed = box.Boxed  # how a run ended: its status (None: killed at the budget), output, time, what contained it


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """The command prefix that runs an unboxed command without network (``unshare --net``, loopback brought up),
    or ``()`` where this machine does not allow it (not root, no ``unshare``, a container without the
    capability)."""
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


def run(command: Sequence[str], *, cwd: Path, home: Path, env: Mapping[str, str] | None = None,
        budget: float, offline: bool = True, readable: Sequence[Path] = (), hidden: Sequence[Path] = (),
        boxed: bool = True, limits: box.Limits | None = None) -> Sandboxed:
    """Run ``command`` for at most ``budget`` seconds, boxed unless ``boxed`` is false; ``home`` (made fresh) is its
    private home, and its parent the run's own directory (the only one it may write); ``readable``: what it reads
    beside the read-only root even under a hidden path (its environment, its tests); ``hidden``: paths it must not
    see (the frontend's checkout)."""
    if boxed:
        spec = box.Spec(writable=(), readable=(*readable, cwd), hidden=tuple(hidden), network=not offline,
                        limits=limits or box.Limits.default())
        return box.run_at_home(home, command, cwd=cwd, env=env, budget=budget, spec=spec)
    prefix = network_isolation() if offline else ()
    ran = box.run_at_home(home, [*prefix, *command], cwd=cwd, env=env, budget=budget, spec=box.Spec(writable=()),
                          boxed=False)
    return replace(ran, network_isolated=bool(prefix))
