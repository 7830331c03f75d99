"""The built-in profiles: real JAX's family as jaxrel knows it (names, pins, API numbers, release data).

The per-release facts (API numbers, minimum jaxlib, runtime pins) are data measured from the
published wheels (``jaxrel/data/jax.json``, :mod:`jaxrel.releasedata`); this module says what
the extras and METADATA cannot: import names, where versions live, which plugins are exempt.
"""

from __future__ import annotations

from jaxrel import releasedata
from jaxrel.family.model import ApiNumber, Backend, Family, Frontend, PluginSpec

__all__ = ["PROFILES", "jax_profile"]


# Every spelling of jaxlib's release tuple in jax's history (`git log -S` over jax/ and tests/):
# `from jax._src.lib import version as jaxlib_version`, `jaxlib.version` after
# `from jax._src import lib as jaxlib`, `jax._src.lib.version`, `jaxlib.version.__version_info__`,
# `jtu.jaxlib_version()` and `jaxlib_version = jtu.parse_version(jax.lib.__version__)` in tests.
JAX_RELEASE_SPELLINGS = (
    "jax._src.lib.version",
    "jaxlib.version.__version_info__",
    "jax._src.test_util.jaxlib_version()",
    "jax._src.test_util.parse_version(jax.lib.__version__)",
    "jax._src.test_util.parse_version(jaxlib.__version__)",
    "jax._src.test_util.parse_version(jaxlib.version.__version__)",
    "jax._src.test_util.parse_version(jax._src.lib.version_str)",
)
# jax's own tests a compat cell runs by default: fast, meaningful on CPU, touching what jaxlib
# provides (pytrees, dtypes, arrays, FFI, export/serialization, x64); measured in docs/compat.md.
JAX_DEFAULT_TESTS = (
    "tests/tree_util_test.py", "tests/api_util_test.py", "tests/util_test.py", "tests/config_test.py",
    "tests/errors_test.py", "tests/extend_test.py", "tests/ffi_test.py", "tests/x64_context_test.py",
    "tests/jaxpr_util_test.py", "tests/array_test.py", "tests/export_test.py", "tests/dtypes_test.py",
)
JAX_SMOKE = """
import jax.numpy as jnp
facts["sum"] = float(jnp.ones(3).sum())
facts["devices"] = [str(d) for d in frontend.devices()]
facts["platforms"] = sorted({d.platform for d in frontend.devices()})
"""


def jax_profile() -> Family:
    """The built-in profile of real JAX."""
    return Family(
        name="jax",
        frontend=Frontend(
            distribution="jax",
            package="jax",
            version_file="jax/version.py",
            minimum_backend_variable="_minimum_jaxlib_version",
            tests=JAX_DEFAULT_TESTS,
            test_requirements="build/test-requirements.txt",
            smoke=JAX_SMOKE,
        ),
        backend=Backend(
            distribution="jaxlib",
            package="jaxlib",
            version_file="jaxlib/version.py",
            ffi_header="jaxlib/include/xla/ffi/api/c_api.h",
            release_spellings=JAX_RELEASE_SPELLINGS,
        ),
        # Which plugins exist and how they pin is read from each release's extras
        # (jaxrel.distributions.extras); the profile keeps what the extras cannot say: the import
        # names, which distributions jax/jaxlib hold to jaxlib's release number, and which
        # are exempt (measured from jaxlib/plugin_support.py and jax/_src/xla_bridge.py).
        plugins=(
            PluginSpec("jax-cuda12-plugin", "jax_cuda12_plugin"),
            PluginSpec("jax-cuda12-pjrt", "jax_plugins.xla_cuda12"),
            PluginSpec("jax-cuda13-plugin", "jax_cuda13_plugin"),
            PluginSpec("jax-cuda13-pjrt", "jax_plugins.xla_cuda13"),
            # oneAPI is checked against jaxlib's version (jaxlib/plugin_support.py) but released on its own
            # schedule: its extra admits a range (>=current jaxlib,<=jax), and the index has it at 0.11.2 only.
            PluginSpec("jax-oneapi-plugin", "jax_oneapi_plugin", released_separately=True),
            PluginSpec("jax-oneapi-pjrt", "jax_plugins.xla_oneapi", released_separately=True),
            # ROCm plugins are released on their own schedule; jaxlib skips their check.
            PluginSpec("jax-rocm*", None, pinned=False, released_separately=True),
            # libtpu has its own numbering; jax loads it without a version check; the tpu
            # extra pins it (libtpu==0.0.N.*): a mismatch is a warning, not a refusal.
            PluginSpec("libtpu", "libtpu", pinned=False, runtime=True),
            PluginSpec("libtpu-nightly", "libtpu", pinned=False, runtime=True),  # the tpu extra before libtpu
        ),
        api_numbers=(
            ApiNumber(
                "jaxlib_extension_version",
                "jaxlib/xla_client.py",
                "_version",
                aliases=("xla_extension_version",),
            ),
            ApiNumber("ifrt_version", "jaxlib/xla_client.py", "_ifrt_version", literal=False),
        ),
        backend_releases=dict(releasedata.builtin("jax")["jaxlib"]),
        frontend_minimums={
            version: row["minimum_jaxlib"]
            for version, row in releasedata.builtin("jax")["jax"].items()
            if row.get("minimum_jaxlib")
        },
        frontend_runtime_pins={
            version: {name: (pin["extra"], pin["pin"]) for name, pin in row["runtime_pins"].items()}
            for version, row in releasedata.builtin("jax")["jax"].items() if row.get("runtime_pins")
        },
        compat_suite=True,
    )


PROFILES = {"jax": jax_profile}  # profile name -> the family it builds
