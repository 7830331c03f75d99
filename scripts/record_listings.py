"""Record the index listings the matrix unit tests use (``tests/data/listings.json``).

Keeps every file of jaxlib and the cuda12 plugins for linux x86_64 (CPython 3.11-3.13 and
``py3-none``) plus one macOS wheel per release, so platform filtering stays tested; drops URLs.
The other plugin families (cuda13, rocm7, oneapi, libtpu) keep only recent releases' CPython
3.12 / ``py3-none`` linux x86_64 wheels, so the file stays small.

    python scripts/record_listings.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.version import Version  # noqa: E402

from jaxrel.distributions.index import Index  # noqa: E402

PROJECTS = ("jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt")
# other plugin families: project -> the oldest release kept
RECENT = {"jax-cuda13-plugin": "0.11.0", "jax-cuda13-pjrt": "0.11.0", "jax-rocm7-plugin": "0.11.0",
          "jax-rocm7-pjrt": "0.11.0", "jax-oneapi-plugin": "0.11.0.dev0", "jax-oneapi-pjrt": "0.11.0.dev0",
          "libtpu": "0.0.49"}
KEEP = re.compile(r"-(cp31[123]-cp31[123]|py3-none)-(manylinux\w*x86_64|any)\.whl$")
KEEP_RECENT = re.compile(r"-(cp312-cp312|py3-none)-(manylinux\w*x86_64|any)\.whl$")


def main() -> int:
    index = Index.from_pip(refresh=True)
    record: dict[str, list[dict[str, str | None]]] = {}
    for project in PROJECTS:
        files, mac_seen = [], set()
        for file in index.listing(project).files:
            mac = "macosx" in file.filename and file.version not in mac_seen
            if mac:
                mac_seen.add(file.version)
            if KEEP.search(file.filename) or mac:
                files.append({"filename": file.filename, "sha256": file.sha256,
                              "requires_python": file.requires_python, "yanked": file.yanked})
        record[project] = files
    for project, oldest in RECENT.items():
        record[project] = [{"filename": f.filename, "sha256": f.sha256, "requires_python": f.requires_python,
                            "yanked": f.yanked}
                           for f in index.listing(project).files
                           if f.version >= Version(oldest) and KEEP_RECENT.search(f.filename)]
    out = ROOT / "tests" / "data" / "listings.json"
    out.write_text(json.dumps(record, indent=0) + "\n")
    print(f"{out}: {', '.join(f'{p} {len(f)} files' for p, f in record.items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
