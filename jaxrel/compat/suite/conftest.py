"""The compat suite's setup: eight host CPU devices, and the ``needs`` marker.

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
"""

from __future__ import annotations

import os

# Before anything imports jax: eight CPU devices for the sharding tests. JAX_PLATFORMS is left
# alone, so a GPU is used where there is one.
os.environ["XLA_FLAGS"] = " ".join(
    filter(None, [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"])
)

import pytest  # noqa: E402

from jaxrel import gating  # noqa: E402

MARKER = "needs([feature], **minimums): skip unless the environment has these releases / API numbers"

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def pytest_report_header(config: pytest.Config) -> str:
    found = {name: gating.installed_version(name) for name in ("jax", "jaxlib")}
    return "compat suite: " + ", ".join(f"{name} {version or 'not installed'}" for name, version in found.items())


def unmet_need(marker: pytest.Mark) -> str | None:
    """The skip reason for one ``needs`` marker, ``None`` when the environment meets it."""
    releases = {name.replace("_", "-"): str(v) for name, v in marker.kwargs.items() if name not in gating.API_GATES}
    api = {name: int(v) for name, v in marker.kwargs.items() if name in gating.API_GATES}
    reason = gating.unmet(releases, api)
    return f"{marker.args[0]}: {reason}" if reason and marker.args else reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reasons = [reason for marker in item.iter_markers("needs") if (reason := unmet_need(marker))]
        if reasons:
            item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))


@pytest.fixture(scope="session")
def cpu_mesh():
    """A one-axis (``"i"``) mesh of 8 CPU devices (4 if only 4 are available)."""
    import jax
    import numpy as np

    devices = jax.devices("cpu")
    if len(devices) < 4:
        pytest.skip(f"needs 4 CPU devices (XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}); jax.devices('cpu') = {devices}")
    return jax.sharding.Mesh(np.array(devices[: 8 if len(devices) >= 8 else 4]), ("i",))
