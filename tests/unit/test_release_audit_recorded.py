"""``jaxrel release audit --family jax --since 0.4.30`` against the real index as recorded
(tests/data/audit/index.json.gz, ``scripts/record_audit.py``: every listing the audit read, every METADATA's
headers), served on loopback as a PEP 691 index with PEP 658 metadata.

Two things are held: the audit finds exactly what it found on the real index (no finding added, none lost),
and every finding is true of the index's own data, checked here by a reading of the recording that shares no
code with the audit:

* each yanked file is yanked;
* each late file came more than two days after the family's first file, and every late file is named;
* each upload-order window is the time between the frontend's wheel and the first backend file it admits;
* each uninstallable extra has no release that satisfies it;
* each wheel-set gap is a slot one side has and the other lacks;
* each pin is in the METADATA, with the releases it admits as the finding says;
* each re-spin is a ``.postN`` beside its base, as many days after it as the finding says."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import parse_tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from recorded_index import DATA, LISTINGS, Recorded

from jaxrel.cli import main

FAMILY = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")


def _version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return Version(filename.removesuffix(".tar.gz").rpartition("-")[2])
    except (InvalidVersion, ValueError):
        return None


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _files(project: str, version: str) -> list[dict[str, Any]]:
    return [f for f in LISTINGS.get(str(canonicalize_name(project)), []) if _version(f["filename"]) == Version(version)]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = Recorded()
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXREL_CACHE_DIR", str(cache))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["release", "audit", "--family", "jax", "--since", DATA["since"], "--json", "--index-url",
                         f"http://127.0.0.1:{server.httpd.server_port}/simple/"])
    server.httpd.shutdown()
    server.httpd.server_close()
    assert code == 1, "the real index has defects: the audit exits 1"
    yield json.loads(printed.getvalue())


def _findings(report: dict[str, Any]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return sorted((r["version"], f["kind"], f["detail"], tuple(f["files"])) for r in report["releases"]
                  for f in r["findings"])


def test_the_audit_finds_exactly_what_it_found_on_the_real_index(audited: dict[str, Any]) -> None:
    found, recorded = _findings(audited), _findings(DATA["findings"])
    assert [f for f in found if f not in recorded] == [], "a finding the real index did not give"
    assert [f for f in recorded if f not in found] == [], "a finding of the real index lost"
    assert len(found) == 80
    kinds = {kind for _, kind, _, _ in found}
    assert kinds == {"order", "extra", "respin", "pins", "late", "yanked", "wheel-set"}


def _family_first(version: str) -> datetime.datetime:
    return min(_time(f["upload-time"]) for project in FAMILY for f in _files(project, version))


def _check_yanked(version: str, detail: str, files: tuple[str, ...]) -> None:
    project = detail.partition(":")[0]
    assert detail.endswith("every file yanked")
    assert _files(project, version) and all(f["yanked"] is not None for f in _files(project, version))


def _check_late(version: str, detail: str, names: tuple[str, ...]) -> None:
    project = detail.partition(": ")[0]
    assert f": {len(names)} file" in detail and names[0] in detail, "the line counts them all and names the first"
    first = _family_first(version)
    for name in names:
        (item,) = [f for f in _files(project, version) if f["filename"] == name]
        assert _time(item["upload-time"]) - first > datetime.timedelta(days=2), name
    on_time = [f for f in _files(project, version) if f["filename"] not in names]
    assert all(_time(f["upload-time"]) - first <= datetime.timedelta(days=2) for f in on_time), "a late file unnamed"


def _check_order(version: str, detail: str, files: tuple[str, ...]) -> None:
    match = re.match(r"jax \S+ reached the index before any jaxlib(\S+) it requires: .* for (\d+) s", detail)
    assert match, detail
    admitted = SpecifierSet(match.group(1))
    frontend = min(_time(f["upload-time"]) for f in _files("jax", version) if f["filename"].endswith(".whl"))
    backend = min(_time(f["upload-time"]) for f in LISTINGS["jaxlib"]
                  if (v := _version(f["filename"])) is not None and admitted.contains(v, prereleases=True))
    assert backend > frontend
    assert int((backend - frontend).total_seconds()) == int(match.group(2))


def _check_extra(version: str, detail: str, files: tuple[str, ...]) -> None:
    match = re.match(r"jax==\S+\[\S+\] cannot be installed from the index: (\S+) has no release", detail)
    assert match, detail
    requirement = Requirement(match.group(1))
    versions = [v for f in LISTINGS.get(str(canonicalize_name(requirement.name)), [])
                if (v := _version(f["filename"])) is not None and f["yanked"] is None]
    assert not any(requirement.specifier.contains(v, prereleases=True) for v in versions), detail
    metadata = next(text for name, text in DATA["metadata"].items() if name.startswith(f"jax-{version}-"))
    assert str(canonicalize_name(requirement.name)) in str(canonicalize_name(metadata)), "the extra is jax's own"


def _slots(project: str, version: str) -> set[tuple[str, str, str]]:
    slots = set()
    for item in _files(project, version):
        if item["filename"].endswith(".whl"):
            slots |= {(t.interpreter, t.abi, t.platform) for t in
                      parse_tag("-".join(item["filename"][:-4].split("-")[-3:]))}
    return slots


def _check_wheel_set(version: str, detail: str, files: tuple[str, ...]) -> None:
    match = re.match(r"(\S+) (lacks|has) \d+ wheel\(s\) (?:that jaxlib has|jaxlib lacks): (.*)", detail)
    assert match, detail
    plugin, backend = _slots(match.group(1), version), _slots("jaxlib", version)
    for slot in match.group(3).split(", "):
        interpreter, abi, platform = slot.split("-")
        if interpreter == "py3":  # a pjrt: one wheel per platform serves every interpreter
            assert not any(p == platform for _, _, p in plugin) and any(p == platform for _, _, p in backend)
        elif match.group(2) == "lacks":  # on a platform the plugin family builds for (CUDA: Linux)
            assert (interpreter, abi, platform) in backend - plugin and "linux" in platform, slot
        else:
            assert (interpreter, abi, platform) in plugin - backend, slot


def _requires(project: str, version: str) -> list[Requirement]:
    """The Requires-Dist of ``project`` ``version`` as its recorded METADATA says."""
    (text,) = {t for name, t in DATA["metadata"].items() if canonicalize_name(name.split("-")[0]) ==
               canonicalize_name(project) and Version(name.split("-")[1]) == Version(version)}
    return [Requirement(line.partition(":")[2].strip()) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def _released(project: str) -> list[Version]:
    return sorted({v for f in LISTINGS.get(str(canonicalize_name(project)), [])
                   if (v := _version(f["filename"])) is not None and f["yanked"] is None})


def _check_pins(version: str, detail: str, files: tuple[str, ...]) -> None:
    match = re.match(r"(\S+?)(?:\[\S+\])? (\S+) requires (\S+?)(==[^\s;,:]+)[;,:]? (.*)", detail)
    assert match, detail
    subject, subject_version, pinned, specifier, rest = match.groups()
    requirement = next(r for r in _requires(subject, subject_version)
                       if canonicalize_name(r.name) == canonicalize_name(pinned) and str(r.specifier) == specifier)
    versions = _released(pinned)
    admitted = [v for v in versions if requirement.specifier.contains(v, prereleases=True)]
    if "which excludes" in rest:  # the extra pins another release than the one released with it
        assert Version(version) in versions and Version(version) not in admitted
    elif "which no" in rest:  # can never install
        assert admitted == []
    elif "a loose pin" in rest:
        count = int(re.search(r"whichever of (\d+) ", rest).group(1))  # type: ignore[union-attr]
        assert len(admitted) == count > 1
    else:  # a re-spin installs beside the base version's pjrt
        respin = Version(subject_version)
        assert respin.post is not None and respin in versions and respin not in admitted and admitted


def _check_respin(version: str, detail: str, files: tuple[str, ...]) -> None:
    match = re.match(r"(\S+) (\S+): a re-spin of (\S+), (\d+) days after it", detail)
    assert match, detail
    project, respin, base = match.group(1), Version(match.group(2)), Version(match.group(3))
    assert respin.post is not None and respin.base_version == base.base_version
    first = min(_time(f["upload-time"]) for f in _files(project, str(respin)))
    before = min(_time(f["upload-time"]) for f in _files(project, str(base)))
    assert (first - before).days == int(match.group(4))


CHECKS = {"yanked": _check_yanked, "late": _check_late, "order": _check_order, "extra": _check_extra,
          "wheel-set": _check_wheel_set, "pins": _check_pins, "respin": _check_respin}


def test_every_finding_is_true_of_the_index_data(audited: dict[str, Any]) -> None:
    for version, kind, detail, files in _findings(audited):
        CHECKS[kind](version, detail, files)


def test_the_checks_here_refuse_a_false_finding() -> None:
    """The independent reading can fail: findings made false on purpose are each refused."""
    false = [("0.4.33", "yanked", "jax: every file yanked"),
             ("0.4.34", "order", "jax 0.4.34 reached the index before any jaxlib<=0.4.34,>=0.4.34 it requires: "
                                 "`pip install jax==0.4.34` failed from x for 99 s"),
             ("0.5.1", "extra", "jax==0.5.1[cuda12] cannot be installed from the index: "
                                "jax-cuda12-plugin<=0.5.1,>=0.5.1 has no release"),
             ("0.6.0", "wheel-set", "jax-cuda12-plugin lacks 1 wheel(s) that jaxlib has: cp312-cp312-win_amd64"),
             ("0.6.0", "wheel-set", "jax-cuda12-plugin lacks 1 wheel(s) that jaxlib has: "
                                    "cp312-cp312-manylinux2014_x86_64"),
             ("0.9.1", "pins", "jax-rocm7-plugin 0.9.1.post2 requires jax-rocm7-pjrt==0.9.1.*, a loose pin: pip "
                               "pairs it with whichever of 3 jax-rocm7-pjrt releases is newest"),
             ("0.5.0", "late", "jax-cuda12-plugin: 1 file uploaded 5 days after the family's first file of 0.5.0: "
                               "jax_cuda12_plugin-0.5.0-cp312-cp312-manylinux2014_x86_64.whl")]
    for version, kind, detail in false:
        with pytest.raises(AssertionError):
            CHECKS[kind](version, detail, tuple(re.findall(r"\S+\.whl", detail)))
