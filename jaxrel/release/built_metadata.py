"""The requirements a project's build backend computes (jax's ``setup.py`` writes its extras at build time).

``prepare_metadata_for_build_wheel`` (PEP 517) through ``build``, in an isolated environment whose
build requirements pip installs from the index pip's configuration names, as ``python -m build``
would: the METADATA the wheel would carry, without building it (about 4 s for jax). The project is
exported first (:func:`jaxrel.distributions.sources.export`, its working tree's changes included), so
the backend writes nothing into the checkout (setuptools leaves an ``.egg-info`` beside ``setup.py``).
Read once per project directory and run. A backend that fails, or an index that cannot be reached, is ``None``
with the reason: the caller says the check could not apply, and ``release verify`` checks the files.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from jaxrel.distributions.metadata import parse_core_metadata
from jaxrel.distributions.sources import SourceError, export
from jaxrel.errors import BadInput

__all__ = ["built_requirements"]


@functools.lru_cache(maxsize=8)
def built_requirements(source: Path) -> tuple[tuple[str, ...] | None, str]:
    """The ``Requires-Dist`` of the wheel the project at ``source`` would build, or ``None`` and why."""
    import build
    import build.env
    from pyproject_hooks import quiet_subprocess_runner  # the backend's chatter stays off stdout (--json)

    try:
        with tempfile.TemporaryDirectory(prefix="jaxrel-export-") as scratch, \
                build.env.DefaultIsolatedEnv() as env:
            tree, _ = export(source, Path(scratch) / "tree")
            builder = build.ProjectBuilder.from_isolated_env(env, tree, runner=quiet_subprocess_runner)
            env.install(builder.build_system_requires)
            env.install(builder.get_requires_for_build("wheel"))
            with tempfile.TemporaryDirectory(prefix="jaxrel-metadata-") as out:
                info = Path(builder.metadata_path(out))
                raw = (info / "METADATA").read_bytes()
    except (build.BuildException, build.BuildBackendException, SourceError, OSError) as error:
        said = " ".join(str(error).split())[:160] or type(error).__name__
        return None, f"its build backend could not compute them ({said})"
    try:
        metadata = parse_core_metadata(raw, f"the METADATA {source}'s build backend computed", BadInput)
    except BadInput as error:
        return None, str(error)
    return tuple(metadata.requires_dist), "the metadata its build backend computes (PEP 517, isolated)"
