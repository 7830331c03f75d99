"""The extension's free-threaded wheel: built with Bazel against a free-threaded CPython's headers (3.13t, from
``scripts/free_threaded_python.sh``; ``Py_GIL_DISABLED`` from its pyconfig.h), portable (``--config=manylinux``), its
module declaring ``Py_mod_gil``. Checked on the wheel itself: tagged ``cp313-cp313t-manylinux_2_27`` with the
interpreter's own module suffix, ``auditwheel show`` consistent with that tag; beside jaxlib's own ``cp313t`` wheel of
the pinned release, importing jax, jaxlib and the extension leaves the GIL off (no ``PYTHON_GIL``), and eight threads
at once compute eager, jit, vmap and grad like NumPy with the GIL off.
"""

from __future__ import annotations

import json
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from bazel_workspace import kept_workspace
from test_build_manylinux import OPTIONS, assert_auditwheel_agrees, module_of, portable_table

from jaxrel.distributions import envs, pythons
from jaxrel.distributions.bazel import build
from jaxrel.extension import xla

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIN = xla.read_pin(REPO / "WORKSPACE")
THREADS = 8

# Run without PYTHON_GIL: a module that does not declare Py_mod_gil turns the GIL on as it loads, and CPython warns.
GIL_SCRIPT = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", RuntimeWarning)
    import jax, jaxlib, jaxrel_rmsnorm
    import jax.numpy as jnp
    value = float(jaxrel_rmsnorm.rms_norm(jnp.ones((2, 4))).sum())
print(json.dumps({"gil": sys._is_gil_enabled(), "said": [str(w.message) for w in caught if "GIL" in str(w.message)],
                  "value": value}))
"""

# argv: the number of threads. Each thread computes its own inputs through every transformation, several times, all
# starting together; the answer: the largest error of each, the threads that finished, and the GIL at the end.
THREADS_SCRIPT = """
import json, sys, threading
import numpy as np
import jax
from jaxrel_rmsnorm import rms_norm
eps, count = 1e-6, int(sys.argv[1])
def ref(v):
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps)
jitted, batched = jax.jit(rms_norm), jax.vmap(rms_norm)
barrier, lock, errors, finished, failures = threading.Barrier(count), threading.Lock(), {}, [], []
def work(seed):
    try:
        rng = np.random.default_rng(seed)
        barrier.wait()
        for _ in range(5):
            x = rng.standard_normal((3, 7 + seed)).astype(np.float32)
            dy = rng.standard_normal(x.shape).astype(np.float32)
            r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
            ref_grad = r * dy - r**3 * x * (dy * x).mean(-1, keepdims=True)
            batch = np.stack([x, 3 * x - 1])
            found = {
                "eager": float(np.abs(np.asarray(rms_norm(x, eps)) - ref(x)).max()),
                "jit": float(np.abs(np.asarray(jitted(x)) - ref(x)).max()),
                "vmap": float(np.abs(np.asarray(batched(batch)) - np.stack([ref(b) for b in batch])).max()),
                "grad": float(np.abs(np.asarray(jax.grad(lambda v: (rms_norm(v, eps) * dy).sum())(x))
                                     - ref_grad).max()),
            }
            with lock:
                for name, error in found.items():
                    errors[name] = max(errors.get(name, 0.0), error)
        with lock:
            finished.append(seed)
    except Exception as error:
        with lock:
            failures.append(f"{type(error).__name__}: {error}")
threads = [threading.Thread(target=work, args=(seed,)) for seed in range(count)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"errors": errors, "finished": len(finished), "failures": failures, "gil": sys._is_gil_enabled()}))
"""


@pytest.fixture(scope="module")
def free_threaded_python() -> str:
    """The free-threaded CPython 3.13 here; skip, naming the command that builds one, when there is none."""
    pythons.all_pythons.cache_clear()
    try:
        return pythons.python_for("3.13t").executable
    except pythons.PythonNotFound as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def wheel(launcher: list[str], index_reachable: None, free_threaded_python: str,
          tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU wheel built for the free-threaded Python in the manylinux kept workspace (only the module and the
    wheel are rebuilt when another test there built for another Python)."""
    with kept_workspace("manylinux") as workspace:
        (built,) = build(workspace, wheels=["//rmsnorm:wheel"], python=free_threaded_python, bazel_options=OPTIONS,
                         output=tmp_path_factory.mktemp("free-threaded")).wheels
    return built


@pytest.fixture(scope="module")
def environment(wheel: Path, free_threaded_python: str, tmp_path_factory: pytest.TempPathFactory) -> envs.Env:
    """The wheel beside the pinned jax and jaxlib's ``cp313t`` wheel (wheels only, as a free-threaded cell takes)."""
    return envs.create(tmp_path_factory.mktemp("env") / "env", python=free_threaded_python,
                       requirements=[f"jax=={PIN.backend_version}", f"{PIN.backend}=={PIN.backend_version}"],
                       no_deps=[str(wheel)], only_binary=True)


def test_tagged_for_the_free_threaded_abi_and_manylinux_2_27(wheel: Path, tmp_path: Path) -> None:
    assert wheel.name.endswith("-cp313-cp313t-manylinux_2_27_x86_64.whl"), wheel.name
    name, module = module_of(wheel)
    assert name == "jaxrel_rmsnorm/_rmsnorm.cpython-313t-x86_64-linux-gnu.so", name
    with zipfile.ZipFile(wheel) as archive:
        metadata = Parser().parsestr(archive.read(next(n for n in archive.namelist()
                                                       if n.endswith(".dist-info/METADATA"))).decode())
    assert metadata["Requires-Python"] == "==3.13.*"
    assert_auditwheel_agrees(wheel, "x86_64")
    portable_table(module, tmp_path)


@pytest.mark.usefixtures("index_reachable")
def test_importing_it_beside_jaxlib_leaves_the_gil_off(environment: envs.Env) -> None:
    """Without ``PYTHON_GIL``: the module's ``Py_mod_gil`` declaration (and jaxlib's) keep the GIL off."""
    done = environment.run(str(environment.python), "-c", GIL_SCRIPT, unset=("PYTHON_GIL",))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"gil": False, "said": [], "value": pytest.approx(8.0, abs=1e-3)}, found


@pytest.mark.usefixtures("index_reachable")
def test_eight_threads_compute_like_numpy_with_the_gil_off(environment: envs.Env) -> None:
    done = environment.run(str(environment.python), "-c", THREADS_SCRIPT, str(THREADS), env={"PYTHON_GIL": "0"})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["failures"] == [] and found["finished"] == THREADS and found["gil"] is False, found
    assert set(found["errors"]) == {"eager", "jit", "vmap", "grad"}
    assert all(error < 1e-4 for error in found["errors"].values()), found["errors"]
