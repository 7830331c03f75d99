"""``release verify`` on wheels written by the project's own wheel writer (bazel/wheel_builder.py):
manifest, filename and tag agreement, and the policy's pins, each problem one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel.cli import main
from jaxrel.family import load_family
from jaxrel.release.manifest import Artifact, Manifest, ManifestError
from jaxrel.release.verify import verify_dist

REPO = Path(__file__).resolve().parents[2]
FAMILY = load_family(REPO / "tests/data/splitfam/pyproject.toml")
TAG = "py3-none-any"


def wheel(directory: Path, name: str, version: str, requires: list[str], files: dict[str, str]) -> Path:
    sources = directory / f"src-{name}"
    sources.mkdir(exist_ok=True)
    arguments = []
    for inside, text in files.items():
        source = sources / inside.replace("/", "_")
        source.write_text(text)
        arguments += ["--file", f"{source}={inside}"]
    out = directory / f"{name.replace('-', '_')}-{version}-{TAG}.whl"
    subprocess.run([sys.executable, str(REPO / "bazel/wheel_builder.py"), "--out", str(out), "--name", name,
                    "--version", version, "--tag", TAG, "--summary", f"{name} for the verify tests",
                    *(a for r in requires for a in ("--requires", r)), *arguments], check=True)
    return out


def release(directory: Path, core_pin: str = "==0.2.0", frontend_range: str = ">=0.1.0,<=0.2.0") -> Path:
    dist = directory / "dist"
    dist.mkdir()
    built = [
        (wheel(dist, "splitfam-core", "0.2.0", [], {"splitfam_core/version.py": '_version = "0.2.0"\n'}),
         "splitfam-core", "backend"),
        (wheel(dist, "splitfam-cpu-plugin", "0.2.0", [f"splitfam-core{core_pin}"], {"splitfam_cpu_plugin/x.py": ""}),
         "splitfam-cpu-plugin", "plugin"),
        (wheel(dist, "splitfam", "0.2.0", [f"splitfam-core{frontend_range}"],
               {"splitfam/version.py": '_version = "0.2.0"\n_minimum_core_version = "0.1.0"\n'}),
         "splitfam", "frontend"),
    ]
    artifacts = tuple(Artifact.of(path, name, "0.2.0", role) for path, name, role in built)
    Manifest("splitfam", "0.2.0", "v0.2.0", None, artifacts).write(dist)
    return dist


def problems(dist: Path) -> list[str]:
    return verify_dist(dist, FAMILY, run_twine=False).problems()


def test_a_consistent_release_verifies(tmp_path: Path) -> None:
    assert problems(release(tmp_path)) == []


@pytest.mark.parametrize(("pin", "frontend_range", "expected"), [
    (">=0.2.0", ">=0.1.0,<=0.2.0", "splitfam_cpu_plugin-0.2.0-py3-none-any.whl: Requires-Dist splitfam-core>=0.2.0 "
     "does not pin the backend 0.2.0"),
    ("==0.2.0", ">=0.1.0", "splitfam-0.2.0-py3-none-any.whl: Requires-Dist splitfam-core>=0.1.0 is not exactly "
     ">=0.1.0,<=0.2.0"),
    ("==0.2.0", ">=0.2.0,<=0.2.0", "is not exactly >=0.1.0,<=0.2.0"),
])
def test_pins_against_the_policy(tmp_path: Path, pin: str, frontend_range: str, expected: str) -> None:
    found = problems(release(tmp_path, pin, frontend_range))
    assert len(found) == 1 and expected in found[0]


def test_filename_that_lies_about_its_tag_or_version(tmp_path: Path) -> None:
    dist = release(tmp_path)
    plugin = next(dist.glob("splitfam_cpu_plugin-*.whl"))
    renamed = plugin.with_name(plugin.name.replace("py3-none-any", "cp311-cp311-manylinux_2_17_x86_64"))
    plugin.rename(renamed)
    found = problems(dist)
    assert any(p.startswith(f"{renamed.name}: not listed in the manifest") for p in found)
    assert any(f"{plugin.name}: listed in the manifest but missing" in p for p in found)
    manifest_text = (dist / "manifest.json").read_text().replace(plugin.name, renamed.name)
    (dist / "manifest.json").write_text(manifest_text)
    assert problems(dist) == [f"{renamed.name}: filename tags ['cp311-cp311-manylinux_2_17_x86_64'] differ from "
                              "WHEEL's ['py3-none-any']"]


def test_backend_without_its_frontend_and_missing_manifest(tmp_path: Path) -> None:
    dist = release(tmp_path)
    frontend = next(dist.glob("splitfam-0.2.0-*.whl"))
    text = (dist / "manifest.json").read_text()
    frontend.unlink()
    data = json.loads(text)
    data["artifacts"] = [a for a in data["artifacts"] if a["role"] != "frontend"]
    (dist / "manifest.json").write_text(json.dumps(data))
    assert problems(dist) == ["splitfam-core 0.2.0 is released without splitfam 0.2.0; a backend release needs the "
                              "frontend at the same version"]
    shutil.rmtree(dist)
    dist.mkdir()
    with pytest.raises(ManifestError, match=r"no manifest; build the release with `jaxrel release build --output "):
        problems(dist)


def test_a_tampered_wheel_is_refused_1_and_an_unreadable_manifest_is_bad_input_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failed check is exit 1 (the report on stdout); a manifest missing or not JSON leaves nothing
    to check against: exit 2, one line on stderr."""
    dist = release(tmp_path)
    core = next(dist.glob("splitfam_core-*.whl"))
    data = bytearray(core.read_bytes())
    data[len(data) // 2] ^= 0xFF
    core.write_bytes(bytes(data))
    verify = ["release", "verify", str(dist), "--project", str(REPO / "tests/data/splitfam")]
    assert main(verify) == 1
    out, err = capsys.readouterr()
    assert f"{core.name}\n        sha256 " in out and "differs from the manifest's" in out and not err
    for text in ("{", None):
        if text is None:
            (dist / "manifest.json").unlink()
        else:
            (dist / "manifest.json").write_text(text)
        assert main(verify) == 2
        out, err = capsys.readouterr()
        assert not out and len(err.splitlines()) == 1 and "manifest.json: " in err
        assert ("not JSON" if text else "no manifest") in err
