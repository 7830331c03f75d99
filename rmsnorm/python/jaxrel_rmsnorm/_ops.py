"""The FFI targets, registered once per platform, and ``rms_norm`` with a custom VJP built on them.

The CPU handlers are this wheel's; CUDA handlers come from a companion wheel per CUDA major
(``jaxrel-rmsnorm-cuda13``), registered when it is installed. Its import runs the device guard, so a CUDA
build that does not fit the installed jax CUDA plugin, runtime or driver is an ImportError with its fix.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np

from jaxrel_rmsnorm import _rmsnorm

FORWARD = "jaxrel_rms_norm_fwd"
BACKWARD = "jaxrel_rms_norm_bwd"

CUDA_MAJORS = (13, 12)  # companion wheels looked for, newest first


def _register(module: object, platform: str) -> None:
    for name, capsule in module.handlers().items():  # type: ignore[attr-defined]
        jax.ffi.register_ffi_target(name, capsule, platform=platform)


# The companion first: its device guard may refuse, and a refused import registers nothing.
_cuda = next((importlib.import_module(f"jaxrel_rmsnorm_cuda{major}") for major in CUDA_MAJORS
              if importlib.util.find_spec(f"jaxrel_rmsnorm_cuda{major}") is not None), None)
_register(_rmsnorm, "cpu")
_PLATFORMS = ["cpu"]
_IDLE: dict[str, str] = {}
if _cuda is not None:
    _register(_cuda, _cuda.PLATFORM)
    _PLATFORMS.append("cuda")
    if _cuda.idle_reason:
        _IDLE["cuda"] = _cuda.idle_reason


def platforms() -> tuple[str, ...]:
    """The jax platforms the kernels are registered for: ``("cpu",)``, or ``("cpu", "cuda")`` with a CUDA wheel."""
    return tuple(_PLATFORMS)


def idle_reasons() -> dict[str, str]:
    """Platform → why its kernels cannot run here though registered (no NVIDIA driver, no jax CUDA plugin)."""
    return dict(_IDLE)


def _as_float32(x: jax.typing.ArrayLike) -> jax.Array:
    x = jnp.asarray(x)
    if x.dtype != jnp.float32:
        raise TypeError(f"rms_norm supports float32 only, got {x.dtype}; cast with x.astype(jnp.float32)")
    if x.ndim == 0:
        raise ValueError("rms_norm needs an array with at least one axis, got a scalar")
    return x


def _forward(x: jax.Array, eps: float) -> jax.Array:
    call = jax.ffi.ffi_call(FORWARD, jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="broadcast_all")
    return call(x, eps=np.float32(eps))


def _backward(x: jax.Array, dy: jax.Array, eps: float) -> jax.Array:
    call = jax.ffi.ffi_call(BACKWARD, jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="broadcast_all")
    return call(x, dy, eps=np.float32(eps))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _rms_norm(x: jax.Array, eps: float) -> jax.Array:
    return _forward(x, eps)


# The only residual is x: the backward kernel computes 1/rms again from x, which it reads anyway. So under
# jax.grad the forward call (whose output nothing uses) is dropped, and the gradient reads x and dy once.
def _rms_norm_fwd(x: jax.Array, eps: float) -> tuple[jax.Array, jax.Array]:
    return _forward(x, eps), x


def _rms_norm_bwd(eps: float, x: jax.Array, dy: jax.Array) -> tuple[jax.Array]:
    return (_backward(x, dy, eps),)


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


def rms_norm(x: jax.typing.ArrayLike, eps: float = 1e-6) -> jax.Array:
    """``x / sqrt(mean(x**2, axis=-1, keepdims=True) + eps)`` by the C++ kernel (float32)."""
    return _rms_norm(_as_float32(x), float(eps))


def ffi_api() -> str:
    """The XLA FFI API version the kernels were compiled against (e.g. ``"0.3"``)."""
    return str(_rmsnorm.ffi_api())
