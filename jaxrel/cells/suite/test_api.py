"""One test per API, named after it (``test_api[jax.lax.pcast]``): the rows of the API atlas.

Each check computes something and compares it with NumPy or with a structural fact (a jaxpr's
equations, an HLO's collectives, a sharding); none is a ``hasattr``. ``needs(jax=...)`` is the first
release the API works in; ``until=`` the release it is gone from, after which the test asserts
that the old spelling fails and its ``replaced_by`` (another row) works. The boundaries here are
the documented ones; the atlas measures them on real wheels and reports any mismatch.

``JAXLIB_SENSITIVE`` marks the rows whose result can differ between backends of one frontend
(the per-HEAD compat run watches those).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

GONE = (AttributeError, ImportError, TypeError, NotImplementedError)  # how a removed spelling fails


@dataclass
class Api:
    name: str
    check: Callable[..., None]
    since: str | None = None  # first jax release it works in (documented)
    until: str | None = None  # first jax release it is gone from (documented)
    replaced_by: str | None = None
    jaxlib_sensitive: str | None = None  # why its result can differ between jaxlib releases
    needs: dict[str, object] = field(default_factory=dict)  # other needs (API numbers, jaxlib)

    def marks(self) -> list[pytest.MarkDecorator]:
        kwargs: dict[str, object] = {**({"jax": self.since} if self.since else {}), **self.needs}
        if self.until:
            kwargs.update(until=self.until, replaced_by=self.replaced_by)
        elif self.replaced_by:
            kwargs.update(replaced_by=self.replaced_by)
        return [pytest.mark.needs(self.name, **kwargs)] if kwargs else []


APIS: dict[str, Api] = {}


def api(name: str, **details: object) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(check: Callable[..., None]) -> Callable[..., None]:
        APIS[name] = Api(name, check, **details)  # type: ignore[arg-type]
        return check

    return register


# -- helpers ---------------------------------------------------------------------------------------


def smap(f, mesh, in_specs, out_specs):
    """shard_map through whichever entry point this jax has (checking on)."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map

    return shard_map(f, mesh, in_specs, out_specs)


def rows(mesh, columns: int = 3) -> np.ndarray:
    return np.linspace(-1, 1, mesh.size * columns, dtype=np.float32).reshape(mesh.size, columns)


def put(mesh, x):
    """``x`` with its rows split over the mesh."""
    return jax.device_put(x, NamedSharding(mesh, P("i")))


def equations(jaxpr) -> list[str]:
    """Every primitive name in a closed jaxpr, sub-jaxprs included."""
    found = []

    def walk(j):
        for eqn in j.eqns:
            found.append(eqn.primitive.name)
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else [value]:
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jaxpr.jaxpr)
    return found


def mul_add_primitive(module_name: str):
    """``x * y + z`` as a primitive made by ``<module_name>.Primitive``, with impl, abstract eval and lowering."""
    from jax.interpreters import mlir

    module = importlib.import_module(module_name)
    primitive = module.Primitive(f"atlas_mul_add_{module_name.replace('.', '_')}")
    primitive.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
    primitive.def_abstract_eval(lambda x, y, z: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(primitive, mlir.lower_fun(lambda x, y, z: x * y + z, multiple_results=False))
    return primitive


X, Y, Z = (np.arange(6, dtype=np.float32).reshape(2, 3) + k for k in range(3))


def check_primitive(module_name: str) -> None:
    primitive = mul_add_primitive(module_name)
    np.testing.assert_allclose(jax.jit(lambda x, y, z: primitive.bind(x, y, z))(X, Y, Z), X * Y + Z)


# -- renames and removals ------------------------------------------------------------------------


@api("jax.lax.pvary", since="0.6.0", until="0.10.0", replaced_by="jax.lax.pcast")  # deprecated in 0.8.2
def check_pvary(mesh):
    x = rows(mesh)[:1]
    total = jax.jit(smap(lambda b: jax.lax.psum(jax.lax.pvary(b, "i"), "i"), mesh, P(), P()))
    np.testing.assert_allclose(total(x), x * mesh.size, rtol=1e-6)


@api("jax.lax.pcast", since="0.8.2")
def check_pcast(mesh):
    x = rows(mesh)[:1]
    total = jax.jit(smap(lambda b: jax.lax.psum(jax.lax.pcast(b, "i", to="varying"), "i"), mesh, P(), P()))
    np.testing.assert_allclose(total(x), x * mesh.size, rtol=1e-6)


@api("jax.lax.all_gather_invariant", since="0.6.2", until="0.8.2", replaced_by="jax.lax.all_gather(to=)")
def check_all_gather_invariant(mesh):
    # invariant across "i": out_specs P() is accepted, which a plain all_gather's varying result is not
    x = rows(mesh)
    gather = jax.jit(smap(lambda b: jax.lax.all_gather_invariant(b, "i", tiled=True), mesh, P("i"), P()))
    np.testing.assert_array_equal(gather(put(mesh, x)), x)


@api("jax.lax.all_gather(to=)", since="0.10.0")  # measured: 0.8.3 and 0.9.2 allow only to="varying" / "reduced"
def check_all_gather_to(mesh):
    x = rows(mesh)
    gather = jax.jit(smap(lambda b: jax.lax.all_gather(b, "i", tiled=True, to="invarying"), mesh, P("i"), P()))
    np.testing.assert_array_equal(gather(put(mesh, x)), x)


def varying_axes(mesh, read: Callable) -> set:
    seen: dict = {}

    def body(b):
        seen["axes"] = set(read(jax.typeof(b)))
        return b

    jax.jit(smap(body, mesh, P("i"), P("i")))(put(mesh, rows(mesh)))
    return seen["axes"]


@api("jax.typeof(x).vma", since="0.6.0", until="0.10.1", replaced_by="jax.typeof(x).mat.varying")
def check_vma(mesh):
    assert varying_axes(mesh, lambda aval: aval.vma) == {"i"}


@api("jax.typeof(x).mat.varying", since="0.10.0")
def check_mat_varying(mesh):
    assert varying_axes(mesh, lambda aval: aval.mat.varying) == {"i"}


@api("jax.core.Primitive", until="0.6.0", replaced_by="jax.extend.core.Primitive")  # deprecated in 0.4.38
def check_core_primitive():
    check_primitive("jax.core")


@api("jax.extend.core.Primitive", since="0.4.27")
def check_extend_core_primitive():
    check_primitive("jax.extend.core")


def check_ffi_call(module_name: str) -> None:
    """``ffi_call`` lowers to a custom call naming its target, and the backend says it has no such handler."""
    module = importlib.import_module(module_name)
    shape = jax.ShapeDtypeStruct((2,), np.float32)
    if any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(module.ffi_call).parameters.values()):
        call = jax.jit(lambda x: module.ffi_call("atlas_no_such_target", shape, x))  # before jax 0.4.36
    else:
        call = jax.jit(module.ffi_call("atlas_no_such_target", shape))
    x = np.ones(2, np.float32)
    assert "custom_call @atlas_no_such_target" in call.lower(x).as_text()
    with pytest.raises(Exception, match="atlas_no_such_target"):
        jax.block_until_ready(call(x))


@api("jax.extend.ffi.ffi_call", since="0.4.31", until="0.7.0", replaced_by="jax.ffi.ffi_call")
def check_extend_ffi_call():
    check_ffi_call("jax.extend.ffi")


@api("jax.ffi.ffi_call", since="0.5.0")
def check_jax_ffi_call():
    check_ffi_call("jax.ffi")


def check_shard_map_psum(mesh, shard_map) -> None:
    x = rows(mesh)
    total = jax.jit(shard_map(lambda b: jax.lax.psum(b, "i")))
    np.testing.assert_allclose(total(put(mesh, x)), x.sum(0, keepdims=True), rtol=1e-6)


@api("jax.experimental.shard_map.shard_map(check_rep=)", replaced_by="jax.shard_map(check_vma=)")
def check_check_rep(mesh):
    from jax.experimental.shard_map import shard_map

    check_shard_map_psum(mesh, lambda f: shard_map(f, mesh, P("i"), P(), check_rep=True))


@api("jax.shard_map(check_vma=)", since="0.6.1")
def check_check_vma(mesh):
    check_shard_map_psum(mesh, lambda f: jax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P(), check_vma=True))


def xla_client_version() -> int:
    from jax._src.lib import xla_client

    return int(xla_client._version)


@api("jax._src.lib.xla_extension_version", until="0.6.0", replaced_by="jax._src.lib.jaxlib_extension_version")
def check_xla_extension_version():
    from jax._src.lib import xla_extension_version

    assert xla_extension_version == xla_client_version() > 200


@api("jax._src.lib.jaxlib_extension_version", since="0.6.0")
def check_jaxlib_extension_version():
    from jax._src.lib import jaxlib_extension_version

    assert jaxlib_extension_version == xla_client_version() > 200


def layers(w, x):
    from jax.ad_checkpoint import checkpoint_name

    hidden = checkpoint_name(jnp.sin(x @ w), "hidden")
    return jnp.sum(jnp.cos(hidden @ W2))


W1 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
W2 = np.linspace(1, -1, 6, dtype=np.float32).reshape(3, 2)
XS = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)


def analytic_grad() -> np.ndarray:
    h = np.sin(XS @ W1)
    return XS.T @ ((-np.sin(h @ W2) @ W2.T) * np.cos(XS @ W1))


def check_remat(checkpoint) -> None:
    np.testing.assert_allclose(jax.jit(jax.grad(checkpoint(layers)))(W1, XS), analytic_grad(), rtol=1e-5, atol=1e-6)
    assert "remat" in " ".join(equations(jax.make_jaxpr(jax.grad(checkpoint(layers)))(W1, XS)))


@api("jax.ad_checkpoint.checkpoint", until="0.10.0", replaced_by="jax.checkpoint")  # deprecated in 0.8.2
def check_ad_checkpoint_checkpoint():
    from jax.ad_checkpoint import checkpoint

    check_remat(checkpoint)


@api("jax.checkpoint")
def check_jax_checkpoint():
    check_remat(jax.checkpoint)


# -- custom primitives: the rules of "How primitives work" ---------------------------------------


def fresh_primitive(name: str):
    from jax.extend.core import Primitive

    return Primitive(f"atlas_{name}")


@api("primitive JVP rule (jax.interpreters.ad.defjvp)", since="0.4.27")
def check_primitive_jvp():
    from jax.interpreters import ad, mlir

    sin_p = fresh_primitive("sin")
    sin_p.def_impl(np.sin)
    sin_p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(sin_p, mlir.lower_fun(jnp.sin, multiple_results=False))
    ad.defjvp(sin_p, lambda g, x: g * jnp.cos(x))
    x = np.linspace(0, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda v: sin_p.bind(v).sum()))(x), np.cos(x), rtol=1e-6)


@api("primitive transpose rule (jax.interpreters.ad.deflinear2)", since="0.4.27")
def check_primitive_transpose():
    from jax.interpreters import ad, mlir

    scale_p = fresh_primitive("scale3")  # x -> 3 x, linear: its JVP and VJP come from the transpose rule
    scale_p.def_impl(lambda x: 3 * x)
    scale_p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(scale_p, mlir.lower_fun(lambda x: 3 * x, multiple_results=False))
    ad.deflinear2(scale_p, lambda ct, x: [scale_p.bind(ct)])
    x = np.arange(4, dtype=np.float32)
    transposed = jax.linear_transpose(lambda v: scale_p.bind(v), x)
    np.testing.assert_allclose(transposed(np.ones(4, np.float32))[0], np.full(4, 3.0))
    np.testing.assert_allclose(jax.grad(lambda v: (scale_p.bind(v) * v).sum())(x), 6 * x)


@api("primitive batching rule (jax.interpreters.batching.primitive_batchers)", since="0.4.27")
def check_primitive_batching():
    from jax.interpreters import batching

    primitive = mul_add_primitive("jax.extend.core")
    calls = []

    def rule(args, dims):
        calls.append(dims)
        x, y, z = (jnp.moveaxis(a, d, 0) if d is not None else a for a, d in zip(args, dims, strict=True))
        return primitive.bind(x, y, z), 0

    batching.primitive_batchers[primitive] = rule
    out = jax.vmap(lambda x: primitive.bind(x, x, x))(np.stack([X, Y]))
    np.testing.assert_allclose(out, np.stack([X * X + X, Y * Y + Y]))
    assert calls == [(0, 0, 0)], calls


# -- collectives under shard_map -----------------------------------------------------------------


@api("jax.lax.pmean")
def check_pmean(mesh):
    x = rows(mesh)
    mean = jax.jit(smap(lambda b: jax.lax.pmean(b, "i"), mesh, P("i"), P()))
    np.testing.assert_allclose(mean(put(mesh, x)), x.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)


@api("jax.lax.psum_scatter")
def check_psum_scatter(mesh):
    n = mesh.size
    x = np.arange(n * n, dtype=np.float32).reshape(n, n)  # block k (row k) is scattered: device j gets sum_k x[k, j]
    scatter = jax.jit(smap(lambda b: jax.lax.psum_scatter(b, "i", scatter_dimension=1, tiled=True),
                           mesh, P("i"), P(None, "i")))
    np.testing.assert_allclose(scatter(put(mesh, x)), x.sum(0, keepdims=True), rtol=1e-6)


@api("jax.lax.all_to_all")
def check_all_to_all(mesh):
    n = mesh.size
    x = np.arange(n * n, dtype=np.float32).reshape(n, n)
    swap = jax.jit(smap(lambda b: jax.lax.all_to_all(b, "i", split_axis=1, concat_axis=0, tiled=True),
                        mesh, P("i", None), P(None, "i")))
    np.testing.assert_array_equal(swap(put(mesh, x)), x)  # rows sharded in, columns sharded out: same array


@api("jax.lax.axis_index")
def check_axis_index(mesh):
    index = jax.jit(smap(lambda b: b + jax.lax.axis_index("i"), mesh, P("i"), P("i")))
    np.testing.assert_array_equal(index(put(mesh, np.zeros(mesh.size, np.int32))), np.arange(mesh.size))


def all_reduces(text: str) -> int:
    return len(re.findall(r"\ball-reduce(?:-start)?\(|stablehlo\.all_reduce|\"stablehlo\.all_reduce\"", text))


@api("psum transpose is a broadcast (one all-reduce in the gradient)", since="0.6.1")
def check_psum_transpose_collectives(mesh):
    # The device-variance JEP: under check_vma the transpose of psum of a varying value is a pbroadcast,
    # so grad(sum(psum(x))) has the forward all-reduce only (before it, the transpose was another psum).
    total = smap(lambda b: jax.lax.psum(b, "i"), mesh, P("i"), P())
    grad = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(total(x)))))
    x = rows(mesh)
    np.testing.assert_allclose(grad(put(mesh, x)), np.broadcast_to(np.cos(x.sum(0)), x.shape), rtol=1e-5, atol=1e-6)
    assert all_reduces(grad.lower(put(mesh, x)).compile().as_text()) == 1


# -- jax.checkpoint: policies, offload, static_argnums, prevent_cse ------------------------------

POLICIES = {
    "everything_saveable": lambda p: p.everything_saveable,
    "nothing_saveable": lambda p: p.nothing_saveable,
    "dots_saveable": lambda p: p.dots_saveable,
    "checkpoint_dots": lambda p: p.checkpoint_dots,
    "dots_with_no_batch_dims_saveable": lambda p: p.dots_with_no_batch_dims_saveable,
    "checkpoint_dots_with_no_batch_dims": lambda p: p.checkpoint_dots_with_no_batch_dims,
    "save_anything_except_these_names": lambda p: p.save_anything_except_these_names("hidden"),
    "save_any_names_but_these": lambda p: p.save_any_names_but_these("hidden"),
    "save_only_these_names": lambda p: p.save_only_these_names("hidden"),
    "save_from_both_policies": lambda p: p.save_from_both_policies(p.nothing_saveable,
                                                                  p.save_only_these_names("hidden")),
    "save_and_offload_only_these_names": lambda p: p.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"], offload_src="device",
        offload_dst="pinned_host"),
    "offload_dot_with_no_batch_dims": lambda p: p.offload_dot_with_no_batch_dims("device", "pinned_host"),
}
OFFLOAD = "CPU offload: host memory spaces depend on the jaxlib's CPU client"
# expected residual shapes saved from inside ``layers`` (None: not checked)
SAVED = {"nothing_saveable": [], "dots_saveable": ["f32[2,2]", "f32[2,3]"], "save_only_these_names": ["f32[2,3]"],
         "save_from_both_policies": ["f32[2,3]"], "save_any_names_but_these": [],
         "save_anything_except_these_names": ["f32[2,2]", "f32[2,3]"]}


def saved_from_layers(function) -> list[str]:
    from jax.ad_checkpoint import print_saved_residuals

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(function, W1, XS)
    return sorted(line.split()[0] for line in out.getvalue().splitlines() if line.endswith("(layers)"))


def policy_check(policy_name: str) -> Callable[[], None]:
    def check() -> None:
        policy = POLICIES[policy_name](jax.checkpoint_policies)
        function = jax.checkpoint(layers, policy=policy)
        np.testing.assert_allclose(jax.jit(jax.grad(function))(W1, XS), analytic_grad(), rtol=1e-5, atol=1e-6)
        if policy_name in SAVED:
            assert saved_from_layers(function) == SAVED[policy_name]

    return check


for _name in POLICIES:
    offloads = "offload" in _name  # CPU lowering of memory kinds: from jax 0.4.33 (0.4.30 raises NotImplementedError)
    api(f"jax.checkpoint_policies.{_name}", since="0.4.33" if offloads else "0.4.30",
        jaxlib_sensitive=OFFLOAD if offloads else None)(policy_check(_name))


@api("jax.checkpoint(static_argnums=)")
def check_checkpoint_static_argnums():
    traced = []

    def power(x, n):
        traced.append(n)
        return x ** n

    f = jax.checkpoint(power, static_argnums=(1,))
    x = np.float32(1.5)
    np.testing.assert_allclose(jax.grad(f)(x, 3), 3 * x**2, rtol=1e-6)
    assert traced and all(n == 3 for n in traced)  # n stayed a Python int: a static argument


@api("jax.checkpoint(prevent_cse=)")
def check_checkpoint_prevent_cse():
    for prevent in (True, False):
        function = jax.checkpoint(lambda w, x: layers(w, x), prevent_cse=prevent)
        jaxpr = jax.make_jaxpr(jax.grad(function))(W1, XS)
        params = [e.params for e in jaxpr.jaxpr.eqns if "remat" in e.primitive.name or "checkpoint" in e.primitive.name]
        assert params and params[0]["prevent_cse"] is prevent, params
        np.testing.assert_allclose(jax.jit(jax.grad(function))(W1, XS), analytic_grad(), rtol=1e-5, atol=1e-6)


# -- jax.extend --------------------------------------------------------------------------------


@api("jax.extend.backend", since="0.4.33")  # get_backend
def check_extend_backend():
    from jax.extend import backend

    cpu = backend.get_backend("cpu")
    assert cpu.platform == "cpu" and cpu.device_count() == len(jax.devices("cpu"))


@api("jax.extend.random", since="0.4.27")
def check_extend_random():
    from jax.extend import random

    key = random.seed_with_impl(random.threefry_prng_impl, 42)
    np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(jax.random.key(42)))
    np.testing.assert_array_equal(jax.random.uniform(key, (3,)), jax.random.uniform(jax.random.key(42), (3,)))


@api("jax.extend.sharding", since="0.7.0")
def check_extend_sharding(mesh):
    from jax.extend import sharding

    hlo = NamedSharding(mesh, P("i"))._to_xla_hlo_sharding(2)
    proto = sharding.get_serialized_proto_from_hlo_sharding(hlo)
    assert isinstance(proto, bytes) and sharding.get_hlo_sharding_from_serialized_proto(proto) == hlo


@api("jax.extend.mlir", since="0.4.27",
     jaxlib_sensitive="jax.extend.mlir re-exports the MLIR bindings built into jaxlib")
def check_extend_mlir():
    from jax.extend.mlir import ir

    module = jax.jit(lambda x: x * 2).lower(np.ones(3, np.float32)).compiler_ir("stablehlo")
    assert isinstance(module, ir.Module)
    with module.context:
        reparsed = ir.Module.parse(str(module))
    assert "stablehlo.multiply" in str(reparsed)


@api("jax.extend.linear_util", since="0.4.27")
def check_extend_linear_util():
    from jax.extend import linear_util as lu

    def double(x):
        return 2 * x

    if "debug_info" in inspect.signature(lu.wrap_init).parameters:
        from jax._src import api_util

        wrapped = lu.wrap_init(double, debug_info=api_util.debug_info("atlas", double, (3.0,), {}))
    else:
        wrapped = lu.wrap_init(double)
    assert wrapped.call_wrapped(3.0) == 6.0


# -- effects, sharding back ends, the FFI header ---------------------------------------------------


@api("jax.debug.print(ordered=True)",
     jaxlib_sensitive="ordered effects are threaded as tokens through the jaxlib's runtime")
def check_ordered_debug_print():
    def body(x):
        for k in range(4):
            jax.debug.print("atlas step {k} {v}", k=k, v=x + k, ordered=True)
        return x

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax.jit(body)(np.float32(1))
        jax.effects_barrier()
    steps = [int(m[1]) for m in re.finditer(r"atlas step (\d) ", out.getvalue())]
    assert steps == [0, 1, 2, 3], out.getvalue()


@api("Shardy lowering (jax_use_shardy_partitioner)", since="0.4.36",
     jaxlib_sensitive="Shardy's MLIR dialect and passes are part of jaxlib")
def check_shardy_lowering(mesh):
    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", True)
    try:
        f = jax.jit(lambda x: x * 2, out_shardings=NamedSharding(mesh, P("i")))
        x = rows(mesh)
        assert "sdy.sharding" in f.lower(x).as_text()
        np.testing.assert_allclose(f(x), 2 * x)
    finally:
        jax.config.update("jax_use_shardy_partitioner", before)


# -- custom_partitioning's factor keywords (Shardy) ---------------------------------------------------

FACTORS = "Shardy's MLIR dialect, which prints the rule, is part of jaxlib"


def check_factor_keywords(mesh, rule: str, printed: str, **keywords) -> None:
    """A matmul whose contracting dimension arrives split over the mesh, partitioned by ``rule`` with ``keywords``:
    the lowered custom call carries the rule as Shardy prints it (``printed``: its factor sizes and kinds), and
    the product is right (each device multiplies its blocks, then the partial products are summed)."""
    from jax.experimental.custom_partitioning import custom_partitioning

    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", True)
    try:
        @custom_partitioning
        def matmul(x, y):
            return x @ y

        def partition(_, arg_shapes, result_shape):
            split = tuple(arg_shapes[0].sharding.spec)[1:2] not in ((), (None,))

            def lower(x, y):
                return jax.lax.psum(x @ y, "i") if split else x @ y

            return mesh, lower, NamedSharding(mesh, P(None, None)), tuple(a.sharding for a in arg_shapes)

        matmul.def_partition(partition=partition, sharding_rule=rule, **keywords)
        x = np.linspace(-1, 1, 4 * 2 * mesh.size, dtype=np.float32).reshape(4, 2 * mesh.size)
        y = np.linspace(1, -1, 2 * mesh.size * 3, dtype=np.float32).reshape(2 * mesh.size, 3)
        args = (jax.device_put(x, NamedSharding(mesh, P(None, "i"))), jax.device_put(y, NamedSharding(mesh, P("i"))))
        f = jax.jit(matmul)
        text = f.lower(*args).as_text()
        assert printed in text, [line for line in text.splitlines() if "sharding_rule" in line]
        np.testing.assert_allclose(f(*args), x @ y, rtol=1e-5, atol=1e-5)
    finally:
        jax.config.update("jax_use_shardy_partitioner", before)


def factor_kind_check(kind: str) -> Callable[..., None]:
    def check(mesh) -> None:  # the contracting factor k declared of this kind; Shardy prints it as j
        printed = f"{{i=4, j=16, k=3}} {kind}={{j}}"
        check_factor_keywords(mesh, "i k, k j -> i j", printed, **{f"{kind}_factors": ("k",)})

    return check


for _kind in ("reduction", "need_replication", "permutation"):
    api(f"custom_partitioning.def_partition({_kind}_factors=)", since="0.7.2",
        jaxlib_sensitive=FACTORS)(factor_kind_check(_kind))


@api("custom_partitioning.def_partition(**factor_sizes) (compound factors)", since="0.7.2", jaxlib_sensitive=FACTORS)
def check_factor_sizes(mesh):
    # "(k l)": one dimension of 16 made of two factors, whose sizes only the keywords can give
    check_factor_keywords(mesh, "i (k l), (k l) j -> i j", "([i, jk], [jk, l])->([i, l]) {i=4, j=2, k=8, l=3}",
                          k=2, l=8, reduction_factors=("k", "l"))


@api("jax.ffi.include_dir() (the XLA FFI header)", since="0.5.0", needs={"jaxlib_extension_version": 270},
     jaxlib_sensitive="the header ships in the jaxlib wheel")
def check_ffi_header():
    from jax import ffi

    header = os.path.join(ffi.include_dir(), "xla", "ffi", "api", "c_api.h")
    with open(header, encoding="utf-8") as handle:
        text = handle.read()
    assert re.search(r"#define\s+XLA_FFI_API_MAJOR\s+\d+", text), header


# -- the test ----------------------------------------------------------------------------------------


def call(check: Callable[..., None], request: pytest.FixtureRequest) -> None:
    wanted = inspect.signature(check).parameters
    check(**({"mesh": request.getfixturevalue("cpu_mesh")} if "mesh" in wanted else {}))


@pytest.mark.parametrize("entry", [pytest.param(a, id=a.name, marks=a.marks()) for a in APIS.values()])
def test_api(entry: Api, removed, request):
    if entry.jaxlib_sensitive:
        request.node.user_properties.append(("jaxlib_sensitive", entry.jaxlib_sensitive))
    if removed is None:
        call(entry.check, request)
        return
    try:
        call(entry.check, request)
    except GONE:
        removed.gone(request.node)
    else:
        removed.still_works(request.node)  # fails, unless the installed jax is a pre-release of the removing one
        return
    if entry.replaced_by in APIS:
        failure = None
        try:
            call(APIS[entry.replaced_by].check, request)
        except Exception as error:  # reported below, outside the handler: its first line is this sentence
            failure = (f"{entry.name} is gone from jax {removed.installed} and its replacement {entry.replaced_by} "
                       f"fails there: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
        if failure:
            pytest.fail(failure)
