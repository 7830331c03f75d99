"""The device check: the installed jax release's CUDA cell, with the extension, on a real GPU. One report.

``scripts/device_check.sh WHEELS_DIR`` (or ``nox -s device``) installs the extension's CPU wheel built
elsewhere (``--no-deps``, from that directory alone: nothing is built or downloaded on the device) into the
interpreter's environment, then runs this module, which

1. reads the environment as ``jaxrel doctor --json`` does (jax, jaxlib, the CUDA plugin and pjrt) and
   what jax sees (devices, the driver);
2. installs each CUDA wheel in the directory in turn (CUDA 13, CUDA 12: one companion at a time), first the
   one of the installed jax CUDA plugin's major, and for each
   a. lists the GPU code its CUDA module carries (:mod:`jaxrel.extension.fatbin`, and ``cuobjdump
      --list-elf`` where the machine has it);
   b. for the plugin's major: runs the compat suite (``jaxrel/cells/suite``: jax's public API, FFI,
      transforms, the plugin and the extension's tests on every platform it declares) on the default device,
      and jax's own tests for the device given with ``--jax-tests`` (e.g. ``ffi_test.py``), if any;
      for another major: checks that the guard refuses it with the fix, then runs the extension's tests with
      the guard skipped (``JAXREL_SKIP_GUARD=1``), which is what the stream and the driver allow, its CUDA
      runtime wheel installed from the directory when the machine lacks it;
   c. checks the kernels against NumPy and times them against XLA's fusion
      (:mod:`jaxrel.extension.kernel_bench`);
3. with ``--wheels DIR``, runs the extension's tests once more with the CPU wheel alone (every CUDA one
   uninstalled, then the plugin's major reinstalled from DIR): a GPU machine must not fail a platform the
   extension does not declare;

and writes ``device.json`` and ``device.md`` into ``--report``: the plugin's major at the top level, the
others under ``other_cuda_wheels``. Exit status 0 when every step passed, 1 when one failed, 2 for wheels
that are not the extension's builds (checked first, ``--check-wheels DIR``, before anything is installed:
every RECORD, and a real ELF module with GPU code in each CUDA wheel), 3 when the machine has no GPU jax
can use.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles, procs
from jaxrel._util.atomic import write_reports
from jaxrel.cells.probes import last_json
from jaxrel.distributions.extras import extras_of
from jaxrel.errors import BadInput
from jaxrel.extension.device_wheels import (
    CUDA_WHEELS,
    check_wheels,
    install_cuda_wheel,
    not_for_here,
    plugin_major,
    uninstall_cuda_wheels,
)

__all__ = ["check", "main", "render"]

SUITE = Path(__file__).resolve().parents[1] / "cells" / "suite"
GOAL_RATIO = 1.0  # the kernel's time over XLA's fusion the check aims for (reported, not enforced)


def _run(args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """One step in its own process group (stopped whole at its deadline): its exit code, output tails, time."""
    started = time.monotonic()
    try:
        done = procs.run(args, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        code, out, err = 124, "", f"timed out after {timeout:.0f} s"
    return {"code": code, "stdout": out[-20000:], "stderr": err[-20000:],
            "seconds": round(time.monotonic() - started, 1)}


def _last_json(text: str) -> dict[str, Any] | None:
    """The JSON object a step printed: all of its output (``--json``, indented), else its last ``{`` line."""
    try:
        whole = localfiles.loads_json(text.strip(), "the step's answer")
    except BadInput:
        lines = [line for line in text.strip().splitlines() if line.startswith("{")]
        return last_json(lines[-1]) if lines else None
    return whole if isinstance(whole, dict) else None


def _junit_counts(path: Path) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    try:
        cases = list(ElementTree.parse(path).getroot().iter("testcase"))  # pytest's own report, just written
    except (OSError, ElementTree.ParseError):
        return counts  # no report (pytest did not get that far): the step's exit code says why
    for case in cases:
        outcome = {child.tag for child in case}
        key = "failed" if outcome & {"failure", "error"} else "skipped" if "skipped" in outcome else "passed"
        counts[key] += 1
    return counts


_PROBE = """
import importlib, json, sys, jax, jaxrel_rmsnorm
cuda = importlib.import_module(sys.argv[1])
devices = jax.devices()
print(json.dumps({"default_backend": jax.default_backend(), "devices": [str(d) for d in devices],
                  "device_kind": devices[0].device_kind, "platforms": list(jaxrel_rmsnorm.platforms()),
                  "idle": jaxrel_rmsnorm.idle_reasons(), "cuda_runtime": list(cuda._native.cuda_runtime()),
                  "driver": cuda._guard.cuda_driver_version(), "module": cuda._native.__file__}))
"""


def with_cuda_requirements(plugin: str = "jax-cuda13-plugin") -> dict[str, Any]:
    """The NVIDIA wheels ``pip install "jax[cuda13]"`` brings (the plugin's ``with-cuda`` extra), each checked
    against what is installed: the cell is what users install only when every one is satisfied."""
    from importlib import metadata

    try:
        declared = metadata.requires(plugin) or []
    except metadata.PackageNotFoundError:
        return {"plugin": plugin, "installed": False, "ok": False, "missing": [plugin]}
    rows, missing = [], []
    for requirement in extras_of(declared).get("with-cuda", []):
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": "with-cuda"}):
            continue  # another platform's (sys_platform, …)
        try:
            version: str | None = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            version = None
        fits = version is not None and requirement.specifier.contains(version, prereleases=True)
        rows.append({"requirement": f"{requirement.name}{requirement.specifier}", "installed": version, "ok": fits})
        if not fits:
            missing.append(str(requirement.name))
    return {"plugin": plugin, "installed": metadata.version(plugin), "requirements": rows, "missing": missing,
            "ok": not missing}


def _pytest(name: str, paths: list[str], root: Path, report: Path, timeout: float,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    junit = report / f"{name}.xml"
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(junit), *paths],
                timeout, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                              **(env or {})}, cwd=root)
    counts = _junit_counts(junit)
    return {**counts, "code": done["code"], "seconds": done["seconds"],
            "ok": done["code"] == 0 and counts["passed"] > 0, "tail": done["stdout"][-3000:] + done["stderr"][-2000:]}


def _extension_tests(name: str, report: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    return _pytest(name, ["-c", str(SUITE / "pytest.ini"), "--confcutdir", str(SUITE),
                          str(SUITE / "test_extension.py")], SUITE, report, 180, env)


def cpu_only(report: Path) -> dict[str, Any]:
    """The extension's tests with the CPU wheel alone on this GPU machine (every CUDA wheel uninstalled)."""
    removed = uninstall_cuda_wheels()
    step = _extension_tests("cpu-only-wheel", report)
    return {**step, "ok": step["ok"] and removed["code"] == 0}


def _guard_refusal(error: str) -> str:
    """The guard's message (from ``GuardError:`` on) in a failed import's output, or "" when it is not one."""
    at = error.rfind("GuardError: ")
    return " ".join(error[at + len("GuardError: "):].split()) if at >= 0 else ""


def _cuda_wheel(major: int, native: bool, report: Path, jax_tests: Path | None, size: int,
                runtime_missing: str | None = None) -> dict[str, Any]:
    """The steps for the installed CUDA companion of ``major``: the jax plugin's own (``native``) or another,
    whose kernels run with the guard skipped unless its CUDA runtime (``runtime_missing``) is not here."""
    from jaxrel.extension.fatbin import gpu_code

    name = CUDA_WHEELS[major]
    result: dict[str, Any] = {"wheel": name, "cuda_major": major}
    env: dict[str, str] = {}
    probe = _run([sys.executable, "-c", _PROBE, name], 90)
    if not native and probe["code"] == 0:
        result["guard"], result["guard_refused"] = "imported: the guard did not refuse a wheel of another major", False
    elif not native:  # another major: the guard is to refuse it, with the fix
        result["guard"] = _guard_refusal(probe["stderr"]) or probe["stderr"][-2000:]
        result["guard_refused"] = "Fix:" in result["guard"]
        if runtime_missing:
            result["skipped"] = (f"its CUDA runtime ({runtime_missing}) is neither installed nor in the wheels' "
                                 "directory: only the guard was checked")
            return {**result, "ok": result["guard_refused"]}
        env = {"JAXREL_SKIP_GUARD": "1"}
        probe = _run([sys.executable, "-c", _PROBE, name], 90, env=env)
    result["probe"] = _last_json(probe["stdout"]) or {"error": probe["stderr"][-2000:]}
    if "error" in result["probe"]:  # jax or the extension did not import: a failed step, not a machine without GPU
        return {**result, "ok": False}
    if result["probe"].get("default_backend") != "gpu":
        return {**result, "ok": False, "no_gpu": True}
    module = Path(str(result["probe"].get("module", "")))
    result["gpu_code"] = [str(code) for code in gpu_code(module)]
    if shutil.which("cuobjdump"):
        result["cuobjdump"] = _run(["cuobjdump", "--list-elf", "--list-ptx", str(module)], 60)["stdout"].strip()
    if native:
        result["compat_suite"] = _pytest("compat-suite", ["-c", str(SUITE / "pytest.ini"), "--confcutdir",
                                                          str(SUITE), str(SUITE)], SUITE, report, 180)
        if jax_tests is not None:
            files = sorted(str(path.resolve()) for path in jax_tests.rglob("*_test.py"))
            result["jax_tests"] = {**_pytest("jax-tests", files, jax_tests, report, 180), "files": files}
    else:
        result["extension_tests"] = _extension_tests(f"extension-cuda{major}", report, env)
    bench = _run([sys.executable, "-m", "jaxrel.extension.kernel_bench", "--platform", "cuda", "--size", str(size)],
                 150, env=env)
    result["kernels"] = _last_json(bench["stdout"]) or {"error": bench["stderr"][-3000:]}
    errors = result["kernels"].get("errors", {})
    result["kernels_ok"] = bool(errors) and max(errors.values()) <= 1e-5
    steps = [result.get(step, {"ok": True})["ok"] for step in ("compat_suite", "jax_tests", "extension_tests")]
    result["ok"] = bool(all(steps) and result["kernels_ok"] and result.get("guard_refused", True)
                        and {"sm_80", "sm_90"} <= set(result["gpu_code"]))
    return result


def check(report: Path, jax_tests: Path | None, size: int, wheels: Path | None = None) -> dict[str, Any]:
    """Run every step; the report as a dict (also written as device.json/device.md)."""
    import importlib.util

    report.mkdir(parents=True, exist_ok=True)
    doctor = _run([sys.executable, "-m", "jaxrel", "doctor", "--json"], 120)
    result: dict[str, Any] = {"python": sys.version.split()[0],
                              "doctor": _last_json(doctor["stdout"]) or {"error": doctor["stderr"][-2000:]}}
    ours = plugin_major()
    result["with_cuda"] = with_cuda_requirements(f"jax-cuda{ours or 13}-plugin")
    given: dict[int, Path | None]
    if wheels is not None:  # every CUDA wheel given
        given = {major: path for path in check_wheels(wheels) for major, name in CUDA_WHEELS.items()
                 if path.name.startswith(name + "-")}
        result["not_for_here"] = not_for_here(wheels)
    else:  # the companions already installed (the plugin's major is probed even when it is missing)
        given = {major: None for major, name in CUDA_WHEELS.items() if importlib.util.find_spec(name) is not None}
    main = ours if ours in given or not given else next(iter(given))
    main = main or 13
    main_ok, result["other_cuda_wheels"] = False, []
    for major in [main, *(major for major in given if major != main)]:  # the plugin's major first
        wheel = given.get(major)
        installed: dict[str, Any] = install_cuda_wheel(wheel, major) if wheel is not None else {"code": 0}
        step: dict[str, Any]
        if installed["code"] != 0:
            step = {"wheel": CUDA_WHEELS[major], "ok": False, "probe": {"error": installed["stderr"]}}
        else:
            step = _cuda_wheel(major, major == ours or ours is None, report, jax_tests, size,
                               installed.get("runtime_missing"))
        if major != main:
            result["other_cuda_wheels"].append(step)
            continue
        result.update({key: value for key, value in step.items() if key not in ("wheel", "ok")})
        result["cuda_wheel"], main_ok = step["wheel"], step["ok"]
        if "error" in step.get("probe", {}) or step.get("no_gpu"):
            result["ok"] = False
            return result
    if wheels is not None:
        result["cpu_only_wheel"] = cpu_only(report)
        main_wheel = given.get(main)
        if main_wheel is not None:
            install_cuda_wheel(main_wheel, main)  # installed again, as the script left it
    result["ok"] = bool(main_ok and all(step["ok"] for step in result["other_cuda_wheels"])
                        and result.get("cpu_only_wheel", {"ok": True})["ok"])
    return result


def _installed(environment: dict[str, Any]) -> str:
    found = [environment.get("frontend"), environment.get("backend"), *environment.get("plugins", [])]
    return ", ".join(f"{item['name']} {item['version']}" for item in found if item)


def _steps(result: dict[str, Any]) -> list[str]:
    """One line per test step of ``result`` that ran: its counts and time."""
    return [f"- {name.replace('_', ' ')}: {step['passed']} passed, {step['failed']} failed, {step['skipped']} skipped "
            f"({step['seconds']} s)" for name, step in result.items()
            if name in ("compat_suite", "jax_tests", "extension_tests", "cpu_only_wheel")]


def _kernel_lines(kernels: dict[str, Any]) -> list[str]:
    """The kernels' errors against NumPy and their table against XLA's fusion and the floor."""
    if "errors" not in kernels:
        return [f"- kernels: {str(kernels.get('error', 'not run')).strip().splitlines()[-1:]}"] if kernels else []
    lines = ["- max error vs NumPy: " + ", ".join(f"{k} {v:.2e}" for k, v in kernels["errors"].items()),
             "", f"| {kernels['size']}×{kernels['size']} float32 | extension | XLA fusion | ratio "
             "| floor (XLA elementwise, least bytes) |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {t['extension_ms']:.3f} ms | {t['xla_ms']:.3f} ms | {t['ratio']:.2f}×"
              f"{'' if t['ratio'] <= GOAL_RATIO else f' (over the {GOAL_RATIO}× goal)'} | "
              + (f"{t['floor_ms']:.3f} ms, {t['floor_gb_per_s']:.0f} GB/s |" if "floor_ms" in t else "– |")
              for name, t in kernels["timings"].items()]
    return [*lines, ""]


def _other_wheel(step: dict[str, Any]) -> list[str]:
    """A CUDA wheel of a major other than the jax plugin's: what the guard said, then what ran without it."""
    probe = step.get("probe", {})
    lines = [f"## {step['wheel']}: {'passed' if step.get('ok') else 'FAILED'}", ""]
    if "guard" in step:
        lines.append(f"- the guard {'refused it, with the fix' if step.get('guard_refused') else 'did not refuse it'}:"
                     f" {step['guard']}")
    if "skipped" in step:
        return [*lines, f"- not run with the guard skipped: {step['skipped']}", ""]
    if step.get("guard_refused"):
        lines.append("- with the guard skipped (JAXREL_SKIP_GUARD=1):")
    if "error" in probe:
        return [*lines, f"- does not import: {(probe['error'].strip().splitlines() or ['no output'])[-1]}", ""]
    lines.append(f"- runtime (built, loaded): {probe.get('cuda_runtime')}, driver {probe.get('driver')}, "
                 f"GPU code: {', '.join(step.get('gpu_code', []))}")
    return [*lines, *_steps(step), *_kernel_lines(step.get("kernels", {}))]


def render(result: dict[str, Any]) -> str:
    """The report as Markdown."""
    probe = result.get("probe", {})
    lines = ["# Device check", "", f"- result: **{'passed' if result.get('ok') else 'FAILED'}**",
             f"- device: {probe.get('device_kind', '?')} "
             f"({', '.join(probe.get('devices', [])) or probe.get('error', '')})",
             f"- installed: {_installed(result['doctor'].get('environment', {}))}; doctor: "
             f"{'compatible' if result['doctor'].get('compatible') else 'INCOMPATIBLE'}",
             f"- the plugin's with-cuda wheels (what pip installs for "
             f"{result['with_cuda'].get('plugin', 'jax-cuda13-plugin')}[with-cuda]): "
             f"{len(result['with_cuda'].get('requirements', []))} required, missing: "
             f"{', '.join(result['with_cuda']['missing']) or 'none'}",
             f"- CUDA wheel: {result.get('cuda_wheel', '?')}; driver: {probe.get('driver')}, runtime (built, loaded): "
             f"{probe.get('cuda_runtime')}",
             f"- extension platforms: {probe.get('platforms')}, GPU code: {', '.join(result.get('gpu_code', []))}"]
    if "guard" in result:
        lines.append(f"- the guard (another major than the plugin's): {result['guard']}")
    if result.get("not_for_here"):
        lines.append(f"- not for this machine's Python or CPU, not run: {', '.join(result['not_for_here'])}")
    lines += [*_steps(result), *_kernel_lines(result.get("kernels", {}))]
    if "cuobjdump" in result:
        lines += ["```", result["cuobjdump"], "```", ""]
    for step in result.get("other_cuda_wheels", []):
        lines += _other_wheel(step)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("build/device"))
    parser.add_argument("--jax-tests", type=Path, help="a directory of jax's own *_test.py files to run too")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--wheels", type=Path, help="the wheels' directory (scripts/device_check.sh passes it): each "
                        "CUDA wheel is installed from it in turn, and the CPU wheel's tests run alone too")
    parser.add_argument("--check-wheels", type=Path, metavar="DIR",
                        help="only check that DIR holds the extension's wheels as a build makes them (exit 0 or 2)")
    args = parser.parse_args(argv)
    try:
        if args.check_wheels is not None:
            chosen = check_wheels(args.check_wheels)
            print(f"device check: {', '.join(path.name for path in chosen)}: as a build makes them")
            return 0
        result = check(args.report, args.jax_tests, args.size, args.wheels)
    except BadInput as error:
        print(f"device check: {error}", file=sys.stderr)
        return 2
    write_reports({args.report / "device.json": json.dumps(result, indent=2) + "\n",
                   args.report / "device.md": render(result)})
    print(render(result))
    if "error" in result.get("probe", {}):
        last = (result["probe"]["error"].strip().splitlines() or ["no output"])[-1]
        print(f"device check: jax or the extension does not import here: {last}", file=sys.stderr)
        return 1
    if result.get("no_gpu"):
        print("device check: jax sees no GPU here; run it on a machine with one", file=sys.stderr)
        return 3
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
