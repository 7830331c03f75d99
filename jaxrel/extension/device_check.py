"""The device check: the installed jax release's CUDA cell, with the extension, on a real GPU. One report.

``scripts/device_check.sh WHEELS_DIR`` (or ``nox -s device``) installs the extension's wheels built
elsewhere (``--no-deps``, from that directory alone: nothing is built or downloaded on the device) into the
interpreter's environment, then runs this module, which

1. reads the environment as ``jaxrel doctor --json`` does (jax, jaxlib, the CUDA plugin and pjrt) and
   what jax sees (devices, the driver);
2. lists the GPU code the extension's CUDA module carries (:mod:`jaxrel.extension.fatbin`, and
   ``cuobjdump --list-elf`` where the machine has it);
3. runs the compat suite (``jaxrel/cells/suite``: jax's public API, FFI, transforms, the plugin and the
   extension's tests on every platform it declares) on the default device;
4. runs jax's own tests for the device given with ``--jax-tests`` (e.g. ``ffi_test.py``), if any;
5. checks the kernels against NumPy and times them against XLA's fusion (:mod:`jaxrel.extension.kernel_bench`);
6. with ``--wheels DIR``, runs the extension's tests once more with the CPU wheel alone (the CUDA one
   uninstalled, then reinstalled from DIR): a GPU machine must not fail a platform the extension does not
   declare;

and writes ``device.json`` and ``device.md`` into ``--report``. Exit status 0 when every step passed, 1 when
one failed, 2 for wheels that are not the extension's builds (checked first, ``--check-wheels DIR``, before
anything is installed: every RECORD, and a real ELF module with GPU code in the CUDA wheel), 3 when the
machine has no GPU jax can use.
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

__all__ = ["check_wheels", "main"]

SUITE = Path(__file__).resolve().parents[1] / "cells" / "suite"
GOAL_RATIO = 1.2  # the kernel's time over XLA's fusion the check aims for (reported, not enforced)


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
import json, jax, jaxrel_rmsnorm, jaxrel_rmsnorm_cuda13 as cuda
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


EXTENSION = ("jaxrel_rmsnorm", "jaxrel_rmsnorm_cuda13")  # the wheels the check installs, CPU and CUDA


def check_wheels(directory: Path) -> list[Path]:
    """The extension's wheels in ``directory`` for this interpreter, each what a build makes: installable here by
    its tags, every member matching RECORD, and the CUDA wheel's module an ELF object carrying GPU code.
    :class:`BadInput` (one line: the file and the fix) for anything else, before anything is installed."""
    import zipfile

    from packaging.tags import sys_tags

    from jaxrel.distributions.archives import WheelError, verify_record
    from jaxrel.distributions.filenames import FilenameError, wheel_tags
    from jaxrel.extension.fatbin import fatbin_section

    if not directory.is_dir():
        raise BadInput(f"{directory}: not a directory; pass the directory `jaxrel build --wheels …` wrote")
    here = set(sys_tags())
    chosen = []
    for name in EXTENSION:
        found = []
        for path in sorted(directory.glob(f"{name}-*.whl")):
            try:
                if wheel_tags(path.name) & here:
                    found.append(path)
            except FilenameError as error:
                raise BadInput(f"{error}; remove it, or rebuild with `jaxrel build`") from None
        if not found:
            raise BadInput(f"{directory}: no {name} wheel for this Python ({sys.version.split()[0]}); build it with "
                           f"`jaxrel build --wheels //rmsnorm:wheel,//rmsnorm:wheel_cuda13 --python "
                           f"{sys.version_info.major}.{sys.version_info.minor}`")
        chosen.append(found[-1])
    for path in chosen:
        try:
            verify_record(path)
            with zipfile.ZipFile(path) as archive:
                modules = [n for n in archive.namelist() if n.endswith(".so")]
                heads = {n: archive.open(n).read(4) for n in modules}
                cuda = path.name.startswith(EXTENSION[1] + "-")
                if not modules or any(head != b"\x7fELF" for head in heads.values()):
                    raise BadInput(f"{path.name}: its native module is not an ELF shared object (a stand-in, not a "
                                   "build); rebuild it with `jaxrel build`")
                if cuda and not any(fatbin_section(archive.read(n), n) for n in modules):
                    raise BadInput(f"{path.name}: its CUDA module carries no GPU code (.nv_fatbin); rebuild it with "
                                   "`jaxrel build`")
        except (WheelError, zipfile.BadZipFile, OSError) as error:
            why = str(error).removeprefix(f"{path}: ").split("; ")[0]  # the archive's own fix is replaced by ours
            raise BadInput(f"{path.name}: not a wheel a build makes ({why}); rebuild it with `jaxrel build`") from None
    return chosen


def _pytest(name: str, paths: list[str], root: Path, report: Path, timeout: float) -> dict[str, Any]:
    junit = report / f"{name}.xml"
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(junit), *paths],
                timeout, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                cwd=root)
    counts = _junit_counts(junit)
    return {**counts, "code": done["code"], "seconds": done["seconds"],
            "ok": done["code"] == 0 and counts["passed"] > 0, "tail": done["stdout"][-3000:] + done["stderr"][-2000:]}


def cpu_only(wheels: Path, report: Path) -> dict[str, Any]:
    """The extension's tests with the CPU wheel alone on this GPU machine; the CUDA wheel reinstalled after."""
    pip = [sys.executable, "-m", "pip"]
    removed = _run([*pip, "uninstall", "--yes", "jaxrel-rmsnorm-cuda13"], 120)
    try:
        step = _pytest("cpu-only-wheel", ["-c", str(SUITE / "pytest.ini"), "--confcutdir", str(SUITE),
                                          str(SUITE / "test_extension.py")], SUITE, report, 180)
    finally:
        back = _run([*pip, "install", "--quiet", "--no-index", "--no-deps", "--find-links", str(wheels),
                     "jaxrel-rmsnorm-cuda13"], 120)
    return {**step, "ok": step["ok"] and removed["code"] == 0 and back["code"] == 0}


def check(report: Path, jax_tests: Path | None, size: int, wheels: Path | None = None) -> dict[str, Any]:
    """Run every step; the report as a dict (also written as device.json/device.md)."""
    from jaxrel.extension.fatbin import gpu_code

    report.mkdir(parents=True, exist_ok=True)
    doctor = _run([sys.executable, "-m", "jaxrel", "doctor", "--json"], 120)
    result: dict[str, Any] = {"python": sys.version.split()[0],
                              "doctor": _last_json(doctor["stdout"]) or {"error": doctor["stderr"][-2000:]}}
    probe = _run([sys.executable, "-c", _PROBE], 90)
    result["probe"] = _last_json(probe["stdout"]) or {"error": probe["stderr"][-2000:]}
    result["with_cuda"] = with_cuda_requirements()
    if "error" in result["probe"]:  # jax or the extension did not import: a failed step, not a machine without GPU
        result["ok"] = False
        return result
    if result["probe"].get("default_backend") != "gpu":
        result["ok"] = False
        result["no_gpu"] = True
        return result
    module = Path(str(result["probe"].get("module", "")))
    result["gpu_code"] = [str(code) for code in gpu_code(module)]
    if shutil.which("cuobjdump"):
        result["cuobjdump"] = _run(["cuobjdump", "--list-elf", "--list-ptx", str(module)], 60)["stdout"].strip()
    result["compat_suite"] = _pytest("compat-suite", ["-c", str(SUITE / "pytest.ini"), "--confcutdir", str(SUITE),
                                                      str(SUITE)], SUITE, report, 180)
    if jax_tests is not None:
        files = sorted(str(path.resolve()) for path in jax_tests.rglob("*_test.py"))
        result["jax_tests"] = {**_pytest("jax-tests", files, jax_tests, report, 180), "files": files}
    bench = _run([sys.executable, "-m", "jaxrel.extension.kernel_bench", "--platform", "cuda", "--size", str(size)],
                 150)
    result["kernels"] = _last_json(bench["stdout"]) or {"error": bench["stderr"][-3000:]}
    errors = result["kernels"].get("errors", {})
    result["kernels_ok"] = bool(errors) and max(errors.values()) <= 1e-5
    if wheels is not None:
        result["cpu_only_wheel"] = cpu_only(wheels, report)
    result["ok"] = bool(result["compat_suite"]["ok"] and result["kernels_ok"]
                        and result.get("jax_tests", {"ok": True})["ok"]
                        and result.get("cpu_only_wheel", {"ok": True})["ok"]
                        and {"sm_80", "sm_90"} <= set(result["gpu_code"]))
    return result


def _installed(environment: dict[str, Any]) -> str:
    found = [environment.get("frontend"), environment.get("backend"), *environment.get("plugins", [])]
    return ", ".join(f"{item['name']} {item['version']}" for item in found if item)


def render(result: dict[str, Any]) -> str:
    """The report as Markdown."""
    probe = result.get("probe", {})
    lines = ["# Device check", "", f"- result: **{'passed' if result.get('ok') else 'FAILED'}**",
             f"- device: {probe.get('device_kind', '?')} "
             f"({', '.join(probe.get('devices', [])) or probe.get('error', '')})",
             f"- installed: {_installed(result['doctor'].get('environment', {}))}; doctor: "
             f"{'compatible' if result['doctor'].get('compatible') else 'INCOMPATIBLE'}",
             f"- the plugin's with-cuda wheels (what pip installs for jax[cuda13]): "
             f"{len(result['with_cuda'].get('requirements', []))} required, missing: "
             f"{', '.join(result['with_cuda']['missing']) or 'none'}",
             f"- CUDA driver: {probe.get('driver')}, runtime (built, loaded): {probe.get('cuda_runtime')}",
             f"- extension platforms: {probe.get('platforms')}, GPU code: {', '.join(result.get('gpu_code', []))}"]
    for name in ("compat_suite", "jax_tests", "cpu_only_wheel"):
        if name in result:
            step = result[name]
            lines.append(f"- {name.replace('_', ' ')}: {step['passed']} passed, {step['failed']} failed, "
                         f"{step['skipped']} skipped ({step['seconds']} s)")
    kernels = result.get("kernels", {})
    if "errors" in kernels:
        lines.append("- max error vs NumPy: " + ", ".join(f"{k} {v:.2e}" for k, v in kernels["errors"].items()))
        lines += ["", f"| {kernels['size']}×{kernels['size']} float32 | extension | XLA fusion | ratio |",
                  "|---|---|---|---|"]
        lines += [f"| {name} | {t['extension_ms']:.3f} ms | {t['xla_ms']:.3f} ms | {t['ratio']:.2f}×"
                  f"{'' if t['ratio'] <= GOAL_RATIO else f' (over the {GOAL_RATIO}× goal)'} |"
                  for name, t in kernels["timings"].items()]
    if "cuobjdump" in result:
        lines += ["", "```", result["cuobjdump"], "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("build/device"))
    parser.add_argument("--jax-tests", type=Path, help="a directory of jax's own *_test.py files to run too")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--wheels", type=Path, help="the wheels installed (scripts/device_check.sh passes them): "
                        "the CPU wheel's tests then run alone too, the CUDA wheel reinstalled from here")
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
