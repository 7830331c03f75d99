"""The XLA FFI extension wheel, built for real: Bazel 4.2.3 through bazelisk, the pinned jaxlib
wheel fetched through pip's index configuration, real jax/jaxlib in fresh environments.

One Bazel build of the repository's workspace serves most tests; a throwaway copy of the
workspace (its own Bazel output base, expunged afterwards) shows reproducibility, the sha256
pin being enforced, and ``--local-xla``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest
from bazel_workspace import fresh_workspace, kept_workspace
from packaging.tags import sys_tags

import jaxrel
from jaxrel import releasedata
from jaxrel.cli import main
from jaxrel.distributions import envs
from jaxrel.distributions.bazel import BuildError, build
from jaxrel.distributions.wheels import verify_record
from jaxrel.extension import xla

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIN = xla.read_pin(REPO / "WORKSPACE")
PINNED_API = releasedata.builtin("jax")["jaxlib"][PIN.backend_version]["xla_ffi_api"]
MINIMUM = releasedata.first_release_with_ffi_api("jax", "jaxlib", PINNED_API)
OLD_JAXLIB = "0.5.3"  # XLA FFI API 0.1 (measured), below every release with the pinned API
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"

RUNTIME_SCRIPT = """
import json
import numpy as np
import jax
from jaxrel_rmsnorm import rms_norm
from jaxrel_rmsnorm._ops import ffi_api
eps = 1e-6
x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
dy = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
def ref(v):
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps)
r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
ref_grad = r * dy - r**3 * x * (dy * x).mean(-1, keepdims=True)
batch = np.stack([x, 3 * x - 1])
errors = {
    "eager": float(np.abs(np.asarray(rms_norm(x, eps)) - ref(x)).max()),
    "jit": float(np.abs(np.asarray(jax.jit(rms_norm)(x)) - ref(x)).max()),
    "vmap": float(np.abs(np.asarray(jax.vmap(rms_norm)(batch)) - np.stack([ref(b) for b in batch])).max()),
    "grad": float(np.abs(np.asarray(jax.grad(lambda v: (rms_norm(v, eps) * dy).sum())(x)) - ref_grad).max()),
}
print(json.dumps({"errors": errors, "ffi_api": ffi_api(), "jax": jax.__version__}))
"""

REFUSAL_SCRIPT = """
import json, os
result = {}
try:
    import jaxrel_rmsnorm
    result["imported"] = True
except ImportError as error:
    result.update(imported=False, type=type(error).__name__, message=str(error), fix=getattr(error, "fix", None))
import jax.numpy as jnp
try:
    result["jnp_sum"] = float(jnp.ones(3).sum())
except Exception as error:
    result["jnp_error"] = str(error).splitlines()[0]
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def wheel(launcher: list[str], index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension wheel built from the repository's sources (the pin is fetched from the index), in the kept
    workspace of the default configuration (tests/bazel_workspace.py)."""
    with kept_workspace("default") as workspace:
        result = build(workspace, wheels=["rmsnorm"], output=tmp_path_factory.mktemp("dist"))
    assert len(result.wheels) == 1
    return result.wheels[0]


@pytest.fixture(scope="module")
def workspace_copy(
    launcher: list[str], index_reachable: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A copy of the workspace at another path: its own Bazel server and output base, expunged after."""
    with fresh_workspace(launcher, tmp_path_factory.mktemp("workspace")) as copy:
        yield copy


def _metadata(wheel: Path) -> tuple[dict[str, list[str]], dict[str, bytes]]:
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = next(data for name, data in members.items() if name.endswith(".dist-info/METADATA"))
    message = Parser().parsestr(meta.decode())
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return fields, members


def test_wheel_is_named_tagged_and_versioned_from_one_source(wheel: Path) -> None:
    name, version, python_tag, abi_tag, platform_tag = wheel.name[: -len(".whl")].split("-")
    assert (name, version) == ("jaxrel_rmsnorm", jaxrel.__version__)
    assert f"{python_tag}-{abi_tag}-{platform_tag}" in {str(tag) for tag in sys_tags()}, "not installable here"
    assert re.fullmatch(r"manylinux_\d+_\d+_x86_64", platform_tag)
    fields, members = _metadata(wheel)
    assert fields["Version"] == [jaxrel.__version__]
    wheel_file = next(data for name, data in members.items() if name.endswith(".dist-info/WHEEL")).decode()
    assert f"Tag: {python_tag}-{abi_tag}-{platform_tag}" in wheel_file and "Root-Is-Purelib: false" in wheel_file
    assert (python_tag, abi_tag) == ("cp311", "abi3"), "one stable-ABI wheel serves CPython 3.11 and newer"
    assert "jaxrel_rmsnorm/_rmsnorm.abi3.so" in members
    assert fields["Requires-Python"] == [">=3.11"]
    assert "jaxrel_rmsnorm/_guard.py" in members, "the guard is vendored, so the wheel needs no jaxrel"
    verify_record(wheel)


def test_requires_dist_is_the_first_release_with_the_pinned_ffi_api(wheel: Path) -> None:
    fields, members = _metadata(wheel)
    assert MINIMUM == "0.9.1" and PINNED_API == "0.3"  # measured: jaxlib 0.9.1 is the first with FFI API 0.3
    assert fields["Requires-Dist"] == [f"jax>={MINIMUM}", f"jaxlib>={MINIMUM}"]
    info = members["jaxrel_rmsnorm/_build_info.py"].decode()
    assert f'XLA_COMMIT = "{PIN.commit}"' in info and f'FFI_API = "{PINNED_API}"' in info
    assert PIN.sha256 in info, "the build facts name the verified artifact"


def test_twine_check_strict_and_check_wheel_contents(wheel: Path) -> None:
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
                           capture_output=True, text=True)
    assert twine.returncode == 0 and "PASSED" in twine.stdout, twine.stdout + twine.stderr
    contents = subprocess.run([sys.executable, "-m", "check_wheel_contents", str(wheel)],
                              capture_output=True, text=True)
    assert contents.returncode == 0 and f"{wheel}: OK" in contents.stdout, contents.stdout + contents.stderr


def test_auditwheel_policy_is_within_the_declared_tag(wheel: Path) -> None:
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    policy = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_x86_64"', text)
    assert policy, text
    declared = re.search(r"manylinux_(\d+)_(\d+)_x86_64\.whl$", wheel.name)
    assert declared
    needs = (int(policy[1]), int(policy[2]))
    assert needs <= (int(declared[1]), int(declared[2])), f"tagged {declared[0]} but needs glibc {needs}"
    assert "libpython" not in text, "an extension module must not link libpython"


def test_two_clean_builds_are_byte_identical(wheel: Path, workspace_copy: Path) -> None:
    again = build(workspace_copy, wheels=["rmsnorm"], output=workspace_copy / "dist")
    assert [w.name for w in again.wheels] == [wheel.name]
    assert again.wheels[0].read_bytes() == wheel.read_bytes()


@pytest.mark.parametrize(("version", "abi", "says"), [
    ("3.10", "cp310", "the extension is built for CPython 3.11 and newer; CPython 3.10 is older"),
])
def test_a_python_older_than_the_floor_is_refused_naming_the_fix(workspace_copy: Path, tmp_path: Path,
                                                                 version: str, abi: str, says: str) -> None:
    """An interpreter that reports an older CPython (a script standing in for one: none is installed here) is
    refused at analysis with the fix, and nothing is left in the output. (A free-threaded one is built for its own
    ABI: test_build_free_threaded.py.)"""
    import sysconfig

    facts = {"python": str(tmp_path / "python"), "version": version, "include": sysconfig.get_paths()["include"],
             "multiarch": "", "ext_suffix": f".cpython-{abi}-x86_64-linux-gnu.so", "python_tag": abi[:5],
             "abi_tag": abi, "implementation": "cpython", "libc": "glibc 2.36", "machine": "x86_64"}
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *sysconfig*) echo '{json.dumps(facts)}' ;; "
                    f"*) exec {sys.executable} \"$@\" ;; esac\n")
    fake.chmod(0o755)
    with pytest.raises(BuildError) as refused:
        build(workspace_copy, wheels=["rmsnorm"], python=str(fake), output=tmp_path / "dist")
    assert says in str(refused.value) and "Fix: build with" in str(refused.value), str(refused.value)
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


def test_wrong_sha256_fails_the_build_naming_the_pin(workspace_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = workspace_copy / "WORKSPACE"
    original = workspace.read_text()
    wrong = "0" * 64
    workspace.write_text(xla.rewrite(original, xla.XlaPin(**{**PIN.to_json(), "sha256": wrong})))
    out = workspace_copy / "dist-wrong"
    try:
        code = main(["build", "--workspace", str(workspace_copy), "--output", str(out), "--quiet"])
    finally:
        workspace.write_text(original)
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert len(error.splitlines()) == 1, error
    assert "@xla pin" in error and PIN.wheel in error and wrong in error and PIN.sha256 in error
    assert "jaxrel xla pin --jaxlib" in error, "the error names the fix"
    assert not out.exists() or not list(out.iterdir()), "nothing half-built is left in --output"


@pytest.fixture(scope="module")
def old_xla_tree(index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An XLA source-tree layout holding older FFI headers: jaxlib 0.5.3's (FFI API 0.1)."""
    from jaxrel.distributions.index import Index

    index = Index.from_pip()
    chosen = xla.choose_wheel(index.listing("jaxlib").files_for(OLD_JAXLIB), list(sys_tags()))
    assert chosen is not None
    tree = tmp_path_factory.mktemp("xla")
    with zipfile.ZipFile(index.download(chosen)) as archive:
        for name in archive.namelist():
            if name.startswith("jaxlib/include/xla/ffi/api/") and name.endswith(".h"):
                target = tree / name[len("jaxlib/include/"):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    return tree


def test_local_xla_tree_replaces_the_pin(workspace_copy: Path, old_xla_tree: Path, tmp_path: Path) -> None:
    result = build(workspace_copy, wheels=["rmsnorm"], local_xla=old_xla_tree, output=tmp_path / "dist")
    fields, members = _metadata(result.wheels[0])
    first = releasedata.first_release_with_ffi_api("jax", "jaxlib", "0.1")
    assert first == "0.4.33"
    assert fields["Requires-Dist"] == [f"jax>={first}", f"jaxlib>={first}"]
    info = members["jaxrel_rmsnorm/_build_info.py"].decode()
    assert 'FFI_API = "0.1"' in info and f"local XLA tree {old_xla_tree}" in info


def test_override_repository_with_a_prepared_xla_directory(workspace_copy: Path, old_xla_tree: Path,
                                                          tmp_path: Path) -> None:
    """``--override_repository=xla=DIR`` for a DIR laid out like the xla_ffi rule's output."""
    repository = tmp_path / "xla-repo"
    shutil.copytree(old_xla_tree, repository)
    (repository / "WORKSPACE").write_text('workspace(name = "xla")\n')
    (repository / "BUILD.bazel").write_text(
        'package(default_visibility = ["//visibility:public"])\n'
        'cc_library(name = "ffi", hdrs = glob(["xla/ffi/api/**/*.h"]), includes = ["."])\n'
        'exports_files(["defs.bzl"])\n')
    facts = {"XLA_COMMIT": "f" * 40, "XLA_SOURCE": "prepared directory", "BACKEND": "jaxlib",
             "BACKEND_VERSION": OLD_JAXLIB, "FFI_API": "0.1", "MINIMUM_BACKEND": "0.4.33"}
    (repository / "defs.bzl").write_text("".join(f'{key} = "{value}"\n' for key, value in facts.items()))
    result = build(workspace_copy, wheels=["rmsnorm"], bazel_options=[f"--override_repository=xla={repository}"],
                   output=tmp_path / "dist")
    fields, members = _metadata(result.wheels[0])
    assert fields["Requires-Dist"] == ["jax>=0.4.33", "jaxlib>=0.4.33"]
    info = members["jaxrel_rmsnorm/_build_info.py"].decode()
    assert 'XLA_SOURCE = "prepared directory"' in info and f'XLA_COMMIT = "{"f" * 40}"' in info


def test_local_xla_without_headers_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--local-xla", str(tmp_path), "--output", str(tmp_path / "dist"), "--workspace", str(REPO)])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1 and "xla/ffi/api/c_api.h" in error


def computes_like_numpy(wheel: Path, tmp_path: Path, python: str = sys.executable) -> dict[str, object]:
    """``wheel`` installed beside the pinned jax and jaxlib in a fresh environment of ``python``: eager, jit, vmap
    and grad against NumPy (each within 1e-4); what :data:`RUNTIME_SCRIPT` reported."""
    env = envs.create(tmp_path / "env", python=python,
                      requirements=[f"jax=={PIN.backend_version}", f"jaxlib=={PIN.backend_version}"],
                      no_deps=[str(wheel)])
    done = env.run(str(env.python), "-c", RUNTIME_SCRIPT)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    errors = result["errors"]
    assert isinstance(errors, dict) and all(error < 1e-4 for error in errors.values()), errors
    return result


@pytest.mark.usefixtures("index_reachable")
def test_pinned_release_computes_like_numpy(wheel: Path, tmp_path: Path) -> None:
    result = computes_like_numpy(wheel, tmp_path)
    assert result["jax"] == PIN.backend_version and result["ffi_api"] == PINNED_API


@pytest.mark.usefixtures("index_reachable")
def test_the_stable_abi_wheel_computes_on_every_other_python_here(wheel: Path, tmp_path: Path) -> None:
    """The one ``cp311-abi3`` wheel, built with this interpreter's headers, installs and computes on each other
    CPython 3.11+ here (3.12 and 3.13 under pyenv on this machine kind): what the stable ABI promises."""
    from jaxrel.distributions.pythons import find_pythons

    others = {version: python for version, python in find_pythons().items()
              if version != PYTHON and tuple(map(int, version.split("."))) >= (3, 11)}
    if not others:
        pytest.skip(f"no CPython 3.11+ here besides {PYTHON}: install one (pyenv install 3.13)")
    for version, python in others.items():
        result = computes_like_numpy(wheel, tmp_path / version, python=python.executable)
        assert result["jax"] == PIN.backend_version, version


@pytest.mark.usefixtures("index_reachable")
def test_older_jaxlib_is_refused_at_import_and_jax_keeps_working(wheel: Path, tmp_path: Path) -> None:
    env = envs.create(tmp_path / "env", python=sys.executable,
                      requirements=[f"jax=={OLD_JAXLIB}", f"jaxlib=={OLD_JAXLIB}"], no_deps=[str(wheel)])
    refused = json.loads(env.run(str(env.python), "-c", REFUSAL_SCRIPT).stdout.strip().splitlines()[-1])
    assert refused["imported"] is False and refused["type"] == "GuardError"
    assert f"jaxlib {OLD_JAXLIB} provides XLA FFI API 0.1" in refused["message"]
    assert f"{PINNED_API} that jaxrel-rmsnorm {jaxrel.__version__} was built against" in refused["message"]
    assert refused["fix"] == f'pip install "jax>={MINIMUM}" "jaxlib>={MINIMUM}"'
    assert refused["jnp_sum"] == 3.0, "the process stays usable after the refusal"

    # Without the guard, the registration lands before the CPU backend exists and breaks it
    # (measured: afterwards even jnp.ones(3).sum() fails).
    skipped = env.run(str(env.python), "-c", REFUSAL_SCRIPT, env={"JAXREL_SKIP_GUARD": "1"})
    unguarded = json.loads(skipped.stdout.strip().splitlines()[-1])
    assert unguarded["imported"] is True and "jnp_sum" not in unguarded
    assert "Unable to initialize backend" in unguarded["jnp_error"]

    # The guard's fix, applied, makes the import work.
    uv = envs.find_uv()
    assert uv, "uv is installed with the test extra"
    requirements = [part.strip('"') for part in refused["fix"].split()[2:]]
    envs.run_step([uv, "pip", "install", "--quiet", "--python", str(env.python), *requirements],
                  envs.uv_environment(), "applying the guard's fix")
    fixed = json.loads(env.run(str(env.python), "-c", REFUSAL_SCRIPT).stdout.strip().splitlines()[-1])
    assert fixed["imported"] is True and fixed["jnp_sum"] == 3.0


@pytest.mark.usefixtures("index_reachable")
def test_xla_pin_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "WORKSPACE"
    shutil.copy(REPO / "WORKSPACE", workspace)
    original = workspace.read_bytes()
    assert main(["xla", "pin", "--jaxlib", "0.11.0", "--workspace", str(workspace)]) == 0
    assert main(["xla", "show", "--json", "--workspace", str(workspace)]) == 0
    shown = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert shown["backend_version"] == "0.11.0" and shown["commit"] == "131bf41acb4650e4391a640c3f1859c1c86ad74b"
    assert shown["wheel"].startswith("jaxlib-0.11.0-") and re.fullmatch(r"[0-9a-f]{64}", shown["sha256"])
    assert main(["xla", "pin", "--jaxlib", PIN.backend_version, "--workspace", str(workspace)]) == 0
    assert workspace.read_bytes() == original

    for refused, says in (("0.9.0", "no known XLA commit"), ("0.4.32", "yanked"), ("0.99", "not on the index")):
        capsys.readouterr()
        assert main(["xla", "pin", "--jaxlib", refused, "--workspace", str(workspace)]) == 2
        error = capsys.readouterr().err.strip()
        assert says in error and len(error.splitlines()) == 1, error
        assert workspace.read_bytes() == original, "a refused pin leaves WORKSPACE untouched"
