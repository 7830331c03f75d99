"""A sample ecosystem for ``jaxrel downstream``: the dfam family (frontend ``dfam``, backend ``dfam-core``, pure
wheels written file by file), libraries built on it with planted defects, and dfam's git history with one commit
that breaks two of them and a release commit that pins the next backend. Served by a loopback index with upload
times (tests/simple_index.py), so cells resolve as of their era as they do against the real index.

- dfam 0.1.0 … 0.5.0; dfam-core 0.1.0 is not on the index (deleted, as jaxlib's oldest wheels were): dfam 0.1.0
  is ``not-installable``. dfam 0.3.0 adds ``scale(x, factor)``; 0.4.0 its ``axis`` keyword. ``old_alias`` exists in
  every release; the frontend's main line removes it after 0.5.0 (the culprit commit). ``dfam-v0.6.0``, tagged on
  the branch ``release-0.6`` from the main line's head, requires ``dfam-core==0.6.0``, which the index serves ahead
  of its frontend: a bisection from 0.5.0 to it crosses a change of the minimum backend. ``dfam-v0.6.0-range``
  (another branch) admits dfam-core 0.5.0 and 0.6.0, as jax 0.4.31 admits jaxlib 0.4.30 and 0.4.31.
- ``dlib`` 1.0.0 declares ``dfam>=0.1.0`` and calls ``scale(…, axis=0)``: its true minimum is 0.4.0 (the planted
  false minimum; the fix ``dfam>=0.4.0``).
- ``dalias`` and ``dalias-two`` call ``dfam.old_alias``: both regress at HEAD, one root cause. ``dalias`` 2.0.0,
  uploaded after the frontend's history, no longer does: a Crater of that history takes 1.0.0, its release of then.
  ``dalias`` needs ``dhelper``, whose 2.0.0 (uploaded later still) breaks it: every environment of a Crater, its
  bisection's included, resolves as of the Crater's era, where that is 1.0.0.
- ``dconf``: its tests' conftest imports ``scale`` (dfam 0.3.0): on older releases the tests do not import, a failed
  cell (not a selection that collects nothing); its true minimum is 0.3.0.
- ``dflaky``: a test that fails on its first run only (spurious). ``dhang``: a test that never ends (killed at the
  budget). ``dgone``: requires ``dfam==0.1.0`` (broken: cannot be installed). ``dsecret``: fails if a planted
  token reaches it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from matrix_family import sdist

from jaxrel.distributions.wheels import write_wheel

RELEASES = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0")
TOKEN = "dfam-planted-token-9f3c"  # set in jaxrel's environment as GITHUB_TOKEN; no test may see it
HANG_MARKER = "dhang-sleeps-forever"
FAMILY = """
[tool.jaxrel]
name = "dfam"
[tool.jaxrel.frontend]
distribution = "dfam"
package = "dfam"
version-file = "dfam/version.py"
minimum-backend-variable = "_minimum_core_version"
[tool.jaxrel.backend]
distribution = "dfam-core"
package = "dfam_core"
"""


def frontend_source(version: str, *, scale: bool, axis: bool, alias: bool = True, minimum: str = "") -> dict[str, str]:
    """dfam's package at ``version``: what each release (and each commit of its history) holds."""
    body = ['"""dfam: the sample frontend."""', "from dfam.version import _version as __version__", "",
            "def add(a, b):", "    return a + b", ""]
    if scale and axis:
        body += ["def scale(x, factor, axis=None):", "    return [v * factor for v in x]", ""]
    elif scale:
        body += ["def scale(x, factor):", "    return [v * factor for v in x]", ""]
    if alias:
        body += ["def old_alias(a, b):", '    """Deprecated since 0.3: use add."""', "    return add(a, b)", ""]
    return {"dfam/__init__.py": "\n".join(body) + "\n",
            "dfam/version.py": f'_version = "{version}"\n_minimum_core_version = "{minimum or version}"\n'}


def _features(version: str) -> dict[str, bool]:
    major = tuple(int(p) for p in version.split(".")[:2])
    return {"scale": major >= (0, 3), "axis": major >= (0, 4)}


def _place(built: Path, house: Path, when: float) -> Path:
    target = house / built.name
    shutil.move(built, target)
    os.utime(target, (when, when))
    return target


LIBRARIES: dict[str, tuple[list[str], dict[str, str], dict[str, str]]] = {
    # name: (requires, package files, test files)
    "dlib": (["dfam>=0.1.0"],
             {"dlib/__init__.py": "import dfam\n\n\ndef double_rows(x):\n"
                                  "    return dfam.scale(x, 2, axis=0)\n"},
             {"tests/test_dlib.py": "import dlib\n\ndef test_double_rows():\n"
                                    "    assert dlib.double_rows([1, 2]) == [2, 4]\n"
                                    "\ndef test_imports():\n    assert dlib.double_rows\n"}),
    "dalias": (["dfam>=0.2.0", "dhelper"],
               {"dalias/__init__.py": "import dfam\nimport dhelper  # noqa: F401\n\n"
                                      "def total(a, b):\n    return dfam.old_alias(a, b)\n"},
               {"tests/test_dalias.py": "import dalias\n\ndef test_total():\n    assert dalias.total(2, 3) == 5\n"}),
    "dalias-two": (["dfam>=0.2.0"],
                   {"dalias_two/__init__.py": "import dfam\n\ndef inc(a):\n    return dfam.old_alias(a, 1)\n"},
                   {"tests/test_two.py": "import dalias_two\n\ndef test_inc():\n    assert dalias_two.inc(1) == 2\n"}),
    "dflaky": (["dfam>=0.2.0"], {"dflaky/__init__.py": ""},
               {"tests/test_flaky.py": "from pathlib import Path\n\nimport dfam\n\n"
                                       "def test_sometimes():\n"
                                       "    runs = Path(__file__).with_name('runs.txt')\n"
                                       "    count = int(runs.read_text()) + 1 if runs.exists() else 1\n"
                                       "    runs.write_text(str(count))\n"
                                       "    assert count != 1, 'fails on the very first run only'\n"}),
    "dhang": (["dfam>=0.2.0"], {"dhang/__init__.py": ""},
              {"tests/test_hang.py": f"import time\n\ndef test_hangs():\n    while True:  # {HANG_MARKER}\n"
                                     "        time.sleep(1)\n"}),
    "dcrash": (["dfam>=0.2.0"], {"dcrash/__init__.py": ""},
               {"tests/test_crash.py": "import os\nimport signal\n\ndef test_segfaults():\n"
                                       "    os.kill(os.getpid(), signal.SIGSEGV)\n"}),
    "dconf": (["dfam>=0.1.0"], {"dconf/__init__.py": ""},  # its tests' conftest imports what dfam 0.3.0 added
              {"tests/conftest.py": "from dfam import scale  # noqa: F401\n",
               "tests/test_conf.py": "import dfam\n\ndef test_scale():\n    assert dfam.scale([1], 3) == [3]\n"}),
    "dgone": (["dfam==0.1.0"], {"dgone/__init__.py": ""},
              {"tests/test_gone.py": "def test_nothing():\n    pass\n"}),
    "dsecret": (["dfam>=0.2.0"], {"dsecret/__init__.py": ""},
                {"tests/test_secret.py": "import os\n\ndef test_no_token_reaches_the_tests():\n"
                                         f"    seen = [k for k, v in os.environ.items() if {TOKEN!r} in v]\n"
                                         "    assert not seen, seen\n"
                                         "    assert 'GITHUB_TOKEN' not in os.environ\n"}),
}


# dalias 2.0.0 (2025-11-27, after the frontend's history) no longer calls old_alias: a Crater of a commit of 2025-08
# takes 1.0.0, the newest release of its day, and sees it regress
DALIAS_FIXED = {"dalias/__init__.py": "import dfam\n\ndef total(a, b):\n    return dfam.add(a, b)\n",
                "tests/test_dalias.py": "import dalias\n\ndef test_total():\n    assert dalias.total(2, 3) == 5\n"}


def _library(scratch: Path, house: Path, name: str, version: str, requires: list[str], files: dict[str, str],
             when: float) -> None:
    package = {k: v.encode() for k, v in files.items() if not k.startswith("tests/")}
    _place(write_wheel(scratch / f"{name}-{version}", name, version, package, requires), house, when)
    _place(sdist(scratch / f"{name}-{version}-sdist", name, version, tuple(requires),
                 {k: v.encode() for k, v in files.items()}), house, when)


def _core(scratch: Path, house: Path, version: str, when: float) -> None:
    _place(write_wheel(scratch / f"core-{version}", "dfam-core", version,
                       {"dfam_core/__init__.py": f"__version__ = {version!r}\n".encode(),
                        "dfam_core/version.py": f"_version = {version!r}\n".encode()}), house, when)


def build_index(house: Path, third_party: Path) -> Path:
    """Every file the sample index serves, in ``house``: dfam, dfam-core, the libraries, and the third-party wheels
    (pytest and its dependencies, flit_core to build dfam) copied from ``third_party``. Upload times: 2025."""
    house.mkdir(parents=True, exist_ok=True)
    scratch = house.parent / "scratch"
    day = 86400.0
    start = 1735689600.0  # 2025-01-01
    for number, version in enumerate(RELEASES):
        when = start + number * 30 * day
        files = {k: v.encode() for k, v in frontend_source(version, **_features(version)).items()}
        _place(write_wheel(scratch / f"dfam-{version}", "dfam", version, files,
                           [f"dfam-core>={version},<={version}"]), house, when)
        if version != "0.1.0":  # dfam-core 0.1.0 was deleted from the index
            _core(scratch, house, version, when)
    _core(scratch, house, "0.6.0", start + 150 * day)  # the backend of the coming release, ahead of its frontend
    for name, (requires, package, tests) in LIBRARIES.items():
        _library(scratch, house, name, "1.0.0", requires, {**package, **tests}, start + 200 * day)
    _library(scratch, house, "dalias", "2.0.0", ["dfam>=0.2.0"], DALIAS_FIXED, start + 330 * day)
    for version, body, days in (("1.0.0", "", 100), ("2.0.0", "raise ImportError('dhelper 2.0.0 broke its users')\n",
                                                     340)):  # what dalias needs, as of its day and long after
        _place(write_wheel(scratch / f"dhelper-{version}", "dhelper", version, {"dhelper/__init__.py": body.encode()}),
               house, start + days * day)
    for wheel in third_party.glob("*.whl"):
        target = house / wheel.name
        shutil.copy2(wheel, target)
        os.utime(target, (start - 30 * day, start - 30 * day))
    shutil.rmtree(scratch, ignore_errors=True)
    return house


def projects(house: Path) -> dict[str, list[Path]]:
    """The files of ``house`` by project name (as SimpleIndexServer.add takes them)."""
    from jaxrel.distributions.filenames import name_and_version

    found: dict[str, list[Path]] = {}
    for path in sorted(house.iterdir()):
        name = str(name_and_version(path.name)[0])
        found.setdefault(name.replace("-", "_"), []).append(path)
    return found


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dfam", "GIT_AUTHOR_EMAIL": "dfam@example.invalid",
           "GIT_COMMITTER_NAME": "dfam", "GIT_COMMITTER_EMAIL": "dfam@example.invalid",
           "GIT_AUTHOR_DATE": "2025-08-01T00:00:00Z", "GIT_COMMITTER_DATE": "2025-08-01T00:00:00Z"}
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def _write(repo: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text(text)


def frontend_history(repo: Path) -> str:
    """dfam's repository: 0.5.0 tagged ``dfam-v0.5.0``, then five commits to 0.6.0.dev0, the third removing
    ``old_alias``; returns that culprit's hash."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    pyproject = ('[build-system]\nrequires = ["flit_core>=3.4"]\nbuild-backend = "flit_core.buildapi"\n\n'
                 '[project]\nname = "dfam"\nversion = "{version}"\ndescription = "dfam"\n'
                 'dependencies = ["dfam-core>={minimum},<={version}"]\n' + FAMILY)
    _write(repo, {"pyproject.toml": pyproject.format(minimum="0.5.0", version="0.5.0"),
                  **frontend_source("0.5.0", scale=True, axis=True)})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "dfam 0.5.0")
    _git(repo, "tag", "dfam-v0.5.0")
    dev = "0.6.0.dev0"
    _write(repo, {"pyproject.toml": pyproject.format(minimum="0.5.0", version=dev),
                  **frontend_source(dev, scale=True, axis=True, minimum="0.5.0")})
    _git(repo, "commit", "-qam", "Start 0.6.0.dev0")
    _write(repo, {"NOTES.md": "notes\n"})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "Add notes")
    _write(repo, frontend_source(dev, scale=True, axis=True, alias=False, minimum="0.5.0"))
    _git(repo, "commit", "-qam", "Remove old_alias (deprecated since 0.3)")
    culprit = _git(repo, "rev-parse", "HEAD")
    for number in range(2):
        _write(repo, {"NOTES.md": f"notes {number}\n"})
        _git(repo, "commit", "-qam", f"Notes {number}")
    _git(repo, "checkout", "-qb", "release-0.6")  # as jax releases: the release commit pins its own backend
    _write(repo, {"pyproject.toml": pyproject.format(minimum="0.6.0", version="0.6.0"),
                  **frontend_source("0.6.0", scale=True, axis=True, alias=False, minimum="0.6.0")})
    _git(repo, "commit", "-qam", "Prepare for dfam release 0.6.0")
    _git(repo, "tag", "dfam-v0.6.0")
    _git(repo, "checkout", "-q", "-b", "release-0.6-range", "main")  # as jax 0.4.31: the last backend admitted too
    _write(repo, {"pyproject.toml": pyproject.format(minimum="0.5.0", version="0.6.0"),
                  **frontend_source("0.6.0", scale=True, axis=True, alias=False, minimum="0.5.0")})
    _git(repo, "commit", "-qam", "Prepare for dfam release 0.6.0, admitting dfam-core 0.5.0 too")
    _git(repo, "tag", "dfam-v0.6.0-range")
    _git(repo, "checkout", "-q", "main")
    return culprit
