"""RMS normalisation for JAX as an XLA FFI kernel (CPU, and CUDA with ``jaxrel-rmsnorm-cuda13``; float32),
built against a pinned XLA.

Importing this package first runs jaxrel's import-time guard (vendored as ``_guard``): the
installed jaxlib must provide at least the XLA FFI API these kernels were compiled against.
Only then are the FFI targets registered, so a too-old jaxlib gets a clear ImportError with
the fix, and the rest of JAX keeps working in the same process.

    >>> from jaxrel_rmsnorm import rms_norm
    >>> rms_norm(x)            # eager, or under jax.jit / jax.vmap / jax.grad
"""

from jaxrel_rmsnorm import _build_info, _guard

_guard.check(
    backend=_build_info.BACKEND,
    minimum_backend=_build_info.MINIMUM_BACKEND,
    minimum_ffi_api=_build_info.FFI_API,
    consumer=f"{_build_info.DISTRIBUTION} {_build_info.VERSION}",
    install_with=("jax",),
)

from jaxrel_rmsnorm._ops import idle_reasons, platforms, rms_norm  # noqa: E402  (registers the FFI targets)

__version__ = _build_info.VERSION
__all__ = ["idle_reasons", "platforms", "rms_norm", "__version__"]
