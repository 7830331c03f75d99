"""How a plugin cell installs its plugins: what users install, or a light install where the device is not.

A family's extra may ask its plugin for an extra of its own: ``jax[cuda13]`` is
``jax-cuda13-plugin[with-cuda]``, which brings NVIDIA's CUDA wheels (cuBLAS, cuDNN, NCCL, nvcc …, some
gigabytes). A plugin cell installs in one of three ways:

- **full** (where the cell's device is: an NVIDIA GPU for a CUDA family; or ``--plugin-install full``):
  the plugin's extra resolved as pip would resolve it, and every wheel of that resolution downloaded from
  the index, its sha256 verified like the backend's, and installed, so the cell holds what
  ``pip install "jax[cuda13]==V"`` gives a user (a cuDNN older than the plugin needs shows here);
- **light** (elsewhere): the plugin and its pjrt only, enough for the suite to import and discover them;
  the extra is still resolved, so one that cannot be installed fails the cell as it fails a user, but
  nothing is downloaded that the machine could not use;
- **local** (the ``-local`` flavour, ``jax[cuda13-local]``): the plugin and pjrt alone, relying on the
  system's libraries (CUDA), and saying so.

The resolution is ``uv pip compile`` (else ``pip install --dry-run --report``) for the cell's interpreter,
from the cell's index (as of ``--exclude-newer`` where the run has one), kept in ``WORKDIR/resolutions``
for an hour, as jaxrel keeps index listings: the run's other cells and the next run reuse it.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jaxrel._util import localfiles, procs
from jaxrel._util.atomic import write_atomically
from jaxrel._util.text import tail
from jaxrel.cells.hardware import device_for
from jaxrel.cells.matrix import Cell
from jaxrel.cells.settings import EnvSettings
from jaxrel.distributions import envs
from jaxrel.distributions.netlimits import Limits
from jaxrel.distributions.pipconfig import PipIndexConfig, pip_command
from jaxrel.distributions.pythons import python_for
from jaxrel.errors import BadInput

__all__ = ["MODES", "PluginInstall", "parse_pins", "plan", "resolve"]

MODES = ("auto", "full", "light")  # --plugin-install: auto is full where the cell's device is, else light
KEPT_FOR = 3600.0  # seconds a resolution is reused, as long as index listings are


@dataclass(frozen=True)
class PluginInstall:
    """What a plugin cell installs beyond its plugins, and why."""

    mode: str  # "full", "light", "local", or "" (no plugin extra: the plugins are all there is)
    requirement: str = ""  # what was resolved: jax-cuda13-plugin[with-cuda]==0.11.2
    resolution: tuple[tuple[str, str], ...] = ()  # (name, version) it brings beyond the family's own wheels
    reason: str = ""

    def describe(self) -> str:
        """One line for the report."""
        brought = ", ".join(f"{name} {version}" for name, version in self.resolution)
        wheels = f"{len(self.resolution)} {'wheel' if len(self.resolution) == 1 else 'wheels'}"
        if self.mode == "full":
            return f"full: {self.requirement} as pip resolves it, {wheels} verified and installed ({brought}); " \
                   f"{self.reason}"
        if self.mode == "light":
            return f"light: the plugins only ({self.reason}); {self.requirement} resolves to {wheels} more, " \
                   f"not installed ({brought})"
        if self.mode == "local":
            return "local: the plugins only, relying on the system's libraries (CUDA, ROCm) instead of the " \
                   "wheels their extra brings (a -local extra)"
        return ""


def plan(cell: Cell, settings: EnvSettings) -> PluginInstall:
    """How ``cell`` installs its plugins (resolving the plugin's extra unless the cell is local or negative)."""
    if cell.local:
        return PluginInstall("local")
    if not cell.with_extras or cell.negative:
        return PluginInstall("")
    versions = dict(cell.plugins)
    requirement = " ".join(f"{name}[{extras}]=={versions[name]}" for name, extras in cell.with_extras)
    device = device_for(name for name, _ in cell.plugins) or cell.device
    if settings.plugin_install == "full":
        mode, reason = "full", "--plugin-install full"
    elif settings.plugin_install == "auto" and device in settings.devices:
        mode, reason = "full", f"a {device} device is here"
    else:
        mode = "light"
        reason = "--plugin-install light" if settings.plugin_install == "light" else f"no {device} device here"
    index = settings.index.pip_config() if settings.index is not None else None
    family = {str(canonicalize_name(name)) for name, _ in cell.plugins}
    pins = resolve(requirement.split(), python_for(cell.python).executable, settings.workdir / "resolutions", index,
                   settings.exclude_newer)
    return PluginInstall(mode, requirement, tuple(p for p in pins if p[0] not in family), reason)


def parse_pins(text: str, what: str) -> list[tuple[str, str]]:
    """``name==version`` lines (``uv pip compile`` output) as (canonical name, version); comments skipped."""
    pins = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            raise BadInput(f"{what}: {line[:120]!r} is not a requirement ({error})") from None
        exact = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        if len(exact) != 1:
            raise BadInput(f"{what}: {line[:120]!r} is not pinned to one version (name==version)")
        pins.append((str(canonicalize_name(requirement.name)), exact[0]))
    return pins


def resolve(requirements: list[str], python: str, cache: Path, index: PipIndexConfig | None,
            exclude_newer: str | None = None) -> list[tuple[str, str]]:
    """Every distribution ``requirements`` resolve to for ``python``, as pip would install them (as of
    ``exclude_newer`` with uv). The resolver gets jaxrel's network limits: a stall ends after the connect
    timeout, and the whole resolution after the deadline (``JAXREL_NET_TIMEOUT``, ``JAXREL_NET_DEADLINE``)."""
    key = hashlib.sha256(repr((requirements, python, index, exclude_newer)).encode()).hexdigest()[:24]
    kept = cache / f"{key}.txt"
    if kept.is_file() and time.time() - kept.stat().st_mtime < KEPT_FOR:
        return parse_pins(kept.read_text(encoding="utf-8"), str(kept))
    limits = Limits.from_env()
    env = envs.uv_environment(index)
    env.setdefault("UV_HTTP_TIMEOUT", f"{limits.connect:.0f}")
    uv = envs.find_uv()
    try:
        if uv is not None:
            command = [uv, "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--python", python,
                       *(["--exclude-newer", exclude_newer] if exclude_newer else [])]
            done = procs.run(command, input="\n".join(requirements) + "\n", env=env, timeout=limits.deadline)
            text = done.stdout
        else:
            command = [*pip_command(python), "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
                       "--timeout", f"{limits.connect:.0f}", *(index.pip_arguments() if index is not None else []),
                       *requirements]
            done = procs.run(command, env=env, timeout=limits.deadline)
            text = "" if done.returncode else _report_pins(done.stdout)
    except subprocess.TimeoutExpired:
        raise envs.EnvError(f"{' '.join(requirements)} was not resolved within {limits.deadline:g} s: the index "
                            "stalls or is too slow; check it (pip config list), or raise JAXREL_NET_DEADLINE") from None
    if done.returncode != 0:
        raise envs.EnvError(f"{' '.join(requirements)} cannot be resolved as pip would install it "
                            f"(exit {done.returncode}): {tail(done.stderr or done.stdout)}")
    pins = parse_pins(text, f"the resolution of {' '.join(requirements)}")
    write_atomically(kept, "".join(f"{name}=={version}\n" for name, version in pins))
    return pins


def _report_pins(report: str) -> str:
    """``pip install --report`` JSON as ``name==version`` lines."""
    data = localfiles.loads_json(report, "pip's installation report")
    items = data.get("install", []) if isinstance(data, dict) else []
    metadata = [item.get("metadata") for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    return "".join(f"{m.get('name')}=={m.get('version')}\n" for m in metadata if isinstance(m, dict))
