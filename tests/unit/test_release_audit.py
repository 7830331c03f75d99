"""``jaxrel release audit`` against a PEP 691 index on loopback serving a jax-shaped family (tests/matrix_family.py):
upload times, yanks and sizes in the JSON pages, wheels served with HTTP range reads (METADATA is read from the
wheels' ends, never by downloading them), and each kind of defect planted once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from matrix_family import build_matrix, project, wheel

from jaxrel.cli import main
from jaxrel.distributions.filenames import name_and_version
from jaxrel.distributions.index import Index
from jaxrel.distributions.remote_metadata import MetadataReader
from jaxrel.release import audit
from jaxrel.release.project import open_project

FIRST = "2026-07-16T12:00:00Z"


class Served:
    """The index: project → files; each file's upload time and yank; counts the byte ranges asked for."""

    def __init__(self, root: Path) -> None:
        self.root, self.times, self.yanked, self.ranges, self.whole = root, {}, {}, 0, 0
        self.requires: dict[str, str] = {}
        served = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = self.path.strip("/").split("/")
                if parts[0] == "simple" and len(parts) == 2:
                    return self.page(parts[1])
                path = served.root / parts[-1]
                if parts[0] != "files" or not path.is_file():
                    self.send_response(404)
                    self.end_headers()
                    return None
                data = path.read_bytes()
                wanted = self.headers.get("Range", "")
                if wanted.startswith("bytes="):
                    served.ranges += 1
                    first, _, last = wanted[6:].partition("-")
                    start = len(data) - int(last) if first == "" else int(first)
                    end = len(data) - 1 if first == "" or not last else int(last)
                    start = max(0, start)
                    body = data[start:end + 1]
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(data)}")
                else:
                    served.whole += 1
                    body = data
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return None

            def page(self, project: str) -> None:
                files = [p for p in sorted(served.root.iterdir())
                         if str(name_and_version(p.name)[0]) == project]
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": [
                    {"filename": p.name, "url": f"/files/{p.name}", "hashes": {}, "size": p.stat().st_size,
                     "upload-time": served.times.get(p.name, FIRST), "yanked": served.yanked.get(p.name, False),
                     **({"requires-python": served.requires[p.name]} if p.name in served.requires else {})}
                    for p in files]}).encode()
                self.send_response(200 if files else 404)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/simple/"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    files = tmp_path / "index"
    files.mkdir()
    for path in build_matrix(tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            path.rename(files / path.name)
    server = Served(files)
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def run(tmp_path: Path, served: Served) -> list[audit.ReleaseAudit]:
    tree = tmp_path / "tree" if (tmp_path / "tree").is_dir() else project(tmp_path / "tree")
    with open_project(tree) as found:
        index = Index.from_pip(served.url, refresh=True)
        return audit.audit(found.family, found.release, index, ["0.2.0"], reader=MetadataReader())


def test_a_clean_release_has_no_finding_and_metadata_comes_by_range_reads(tmp_path: Path, served: Served) -> None:
    (result,) = run(tmp_path, served)
    assert result.findings == [], result.findings
    assert result.present == {"mfam-core": 4, "mfam-gpu-pjrt": 1, "mfam-gpu-plugin": 2, "mfam": 2}
    assert result.first_upload == FIRST
    assert served.ranges == 2 and served.whole == 0, "the frontend's and the plugin's METADATA, one range read each"
    run(tmp_path, served)
    assert served.ranges == 2, "METADATA is cached by the file's sha256 or URL: nothing is read again"


@pytest.mark.parametrize(("plant", "kind", "says"), [
    ("late", "late", "mfam-core: 2 files uploaded 6–8 days after the family's first file of 0.2.0 (2026-07-16 → "
                     "2026-07-24): mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl, "
                     "mfam_core-0.2.0-cp312-cp312-macosx_11_0_arm64.whl"),
    ("order", "order", "mfam 0.2.0 reached the index before any mfam-core<=0.2.0,>=0.2.0 it requires: `pip install "
                       "mfam==0.2.0` failed from 2026-07-16 11:59:00 UTC for 60 s, until 2026-07-16 12:00:00 UTC"),
    ("requires-python", "requires-python", "mfam 0.2.0 admits Python 3.12 (>=3.12) but mfam-core 0.2.0 requires "
                                           ">=3.13: on 3.12 pip finds no mfam-core 0.2.0"),
    ("yanked", "yanked", "mfam-core: 1 of 4 files yanked (broken build)"),
    ("wheel-set", "wheel-set",
     "mfam-gpu-plugin lacks 1 wheel(s) that mfam-core has: cp313-cp313-manylinux_2_27_x86_64"),
    ("pjrt-pin", "pins", "mfam-gpu-plugin 0.2.0 requires mfam-gpu-pjrt>=0.2.0, not mfam-gpu-pjrt==0.2.0"),
    ("extra", "extra", "mfam==0.2.0[gpu] cannot be installed from the index: mfam-gpu-plugin<=0.2.0,>=0.2.0 has no "
                       "release"),
])
def test_each_defect_is_one_finding(tmp_path: Path, served: Served, plant: str, kind: str, says: str) -> None:
    index = served.root
    if plant == "late":  # every late file is named, not one per distribution
        served.times["mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl"] = "2026-07-22T13:00:00Z"
        served.times["mfam_core-0.2.0-cp312-cp312-macosx_11_0_arm64.whl"] = "2026-07-24T13:00:00Z"
    elif plant == "order":  # the frontend's wheel a minute before its backend: jax's uploads, every release
        served.times["mfam-0.2.0-py3-none-any.whl"] = "2026-07-16T11:59:00Z"
    elif plant == "requires-python":  # the index's data-requires-python of the backend's files, the frontend's own
        for path in index.glob("mfam_core-*"):
            served.requires[path.name] = ">=3.13"
        (index / "mfam-0.2.0-py3-none-any.whl").unlink()
        wheel(index, "mfam", "0.2.0", "py3-none-any", ("mfam-core<=0.2.0,>=0.2.0",
                                                       'mfam-core<=0.2.0,>=0.2.0; extra == "gpu"',
                                                       'mfam-gpu-plugin<=0.2.0,>=0.2.0; extra == "gpu"'),
              requires_python=">=3.12")
    elif plant == "yanked":
        served.yanked["mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl"] = "broken build"
    elif plant == "wheel-set":
        (index / "mfam_gpu_plugin-0.2.0-cp313-cp313-manylinux_2_27_x86_64.whl").unlink()
    elif plant == "pjrt-pin":
        for python in ("cp312", "cp313"):
            (index / f"mfam_gpu_plugin-0.2.0-{python}-{python}-manylinux_2_27_x86_64.whl").unlink()
            wheel(index, "mfam-gpu-plugin", "0.2.0", f"{python}-{python}-manylinux_2_27_x86_64",
                  ("mfam-gpu-pjrt>=0.2.0",))
    elif plant == "extra":
        for path in index.glob("mfam_gpu_*"):
            path.unlink()
    (result,) = run(tmp_path, served)
    found = [f for f in result.findings if f.kind == kind]
    assert found and says in found[0].detail, result.findings


def test_the_command_line_exits_1_on_a_finding(tmp_path: Path, served: Served, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tree = project(tmp_path / "tree")
    monkeypatch.chdir(tree)
    assert main(["release", "audit", "--index-url", served.url, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and [r["version"] for r in data["releases"]] == ["0.2.0"]
    served.yanked["mfam-0.2.0.tar.gz"] = ""
    assert main(["release", "audit", "--index-url", served.url, "--since", "0.1"]) == 1
    assert "0.2.0: yanked: mfam: 1 of 2 files yanked" in capsys.readouterr().out
    assert main(["release", "audit", "--index-url", served.url, "--version", "9.9"]) == 2


def test_a_wildcard_pin_is_judged_not_a_crash(tmp_path: Path, served: Served) -> None:
    """``==0.2.*`` is valid PEP 440 (jax writes it for its -local extras): a finding where it is not the rules'
    range, no InvalidVersion."""
    index = served.root
    (index / "mfam-0.2.0-py3-none-any.whl").unlink()
    wheel(index, "mfam", "0.2.0", "py3-none-any", ("mfam-core==0.2.*", 'mfam-core==0.2.*; extra == "gpu-local"',
                                                   'mfam-gpu-plugin==0.2.*; extra == "gpu-local"'))
    (result,) = run(tmp_path, served)
    assert [f.detail for f in result.findings if f.kind == "pins"] == [
        "mfam 0.2.0 requires mfam-core==0.2.*, not >=minimum,<=0.2.0"]


def test_an_upload_time_past_what_datetime_holds_is_the_index_page_being_wrong(tmp_path: Path, served: Served) -> None:
    from jaxrel.errors import JaxrelError

    served.times["mfam_core-0.2.0-cp313-cp313-macosx_11_0_arm64.whl"] = "9999-12-31T23:59:59-01:00"
    with pytest.raises(JaxrelError, match="an ISO 8601 time") as refused:
        run(tmp_path, served)
    assert "\n" not in str(refused.value) and refused.value.exit_code == 3  # the index served a broken page


def test_a_family_released_separately_is_audited_release_by_release(tmp_path: Path, served: Served) -> None:
    """Its releases come on their own schedule, with re-spins: each is filed under its base version's release."""
    index = served.root
    linux = "manylinux_2_28_x86_64"  # a newer glibc floor than the core's 2_27: the core still installs beside it
    wheel(index, "mfam-tpu-pjrt", "0.2.0", f"py3-none-{linux}")
    wheel(index, "mfam-tpu-pjrt", "0.2.0.post1", f"py3-none-{linux}")
    wheel(index, "mfam-tpu-plugin", "0.2.0", f"cp312-cp312-{linux}", ("mfam-tpu-pjrt==0.2.0+local",))
    wheel(index, "mfam-tpu-plugin", "0.2.0.post1", f"cp312-cp312-{linux}", ("mfam-tpu-pjrt==0.2.0.*",))
    wheel(index, "mfam-tpu-plugin", "0.2.0.post1", f"cp314-cp314-{linux}", ("mfam-tpu-pjrt==0.2.0.*",))
    served.times["mfam_tpu_plugin-0.2.0.post1-cp312-cp312-manylinux_2_28_x86_64.whl"] = "2026-07-20T12:00:00Z"
    served.times["mfam_tpu_plugin-0.2.0.post1-cp314-cp314-manylinux_2_28_x86_64.whl"] = "2026-07-20T12:00:00Z"
    (result,) = run(tmp_path, served)
    found = sorted((f.kind, f.detail) for f in result.findings)
    assert found == sorted([
        ("pins", "mfam-tpu-plugin 0.2.0 requires mfam-tpu-pjrt==0.2.0+local, which no mfam-tpu-pjrt release on the "
                 "index satisfies: `pip install mfam-tpu-plugin==0.2.0` can never succeed"),
        ("pins", "mfam-tpu-plugin 0.2.0.post1 requires mfam-tpu-pjrt==0.2.0.*, a loose pin: pip pairs it with "
                 "whichever of 2 mfam-tpu-pjrt releases (0.2.0, 0.2.0.post1) is newest"),
        ("respin", "mfam-tpu-plugin 0.2.0.post1: a re-spin of 0.2.0, 4 days after it (2026-07-20): a second build of "
                   "that version, which pip prefers from then on wherever a pin admits both (==X.Y.Z.*)"),
        ("wheel-set", "mfam-tpu-plugin 0.2.0.post1 has 1 wheel(s) mfam-core 0.2.0 lacks: "
                      "cp314-cp314-manylinux_2_28_x86_64"),
    ]), found
