"""Record what ``jaxrel release audit --family jax --since 0.4.30`` reads from the index
(``tests/data/audit/index.json.gz``), so that a unit test can serve it on loopback and hold every finding of
the real audit to the index's own data.

Kept: every listing the audit asks for, every file with what the index says of it (name, upload time, yank,
Requires-Python, size; URLs and hashes dropped), and the headers of each METADATA the audit read (the long
description dropped), by file name; the audit's findings beside them. Written in one step.

    python scripts/record_audit.py [--since 0.4.30]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxrel.distributions.index import Index  # noqa: E402
from jaxrel.distributions.pages import IndexFile, Listing  # noqa: E402
from jaxrel.distributions.remote_metadata import MetadataReader  # noqa: E402
from jaxrel.family import resolve_family  # noqa: E402
from jaxrel.release import audit  # noqa: E402
from jaxrel.release.config import BUILTIN  # noqa: E402

OUT = ROOT / "tests" / "data" / "audit" / "index.json.gz"


class RecordingIndex(Index):
    """The real index, keeping each listing it serves."""

    seen: dict[str, Listing]

    def listing(self, project: str) -> Listing:
        found = super().listing(project)
        self.seen[project] = found
        return found


class RecordingReader(MetadataReader):
    """The real METADATA reader, keeping the headers of each METADATA it reads."""

    texts: dict[str, str]

    def _fetch(self, file: IndexFile) -> bytes:
        raw = super()._fetch(file)
        self.texts[file.filename] = raw.decode("utf-8").split("\n\n", 1)[0] + "\n"
        return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", default="0.4.30")
    args = parser.parse_args()
    family, release = resolve_family("jax"), BUILTIN["jax"]()
    index = RecordingIndex.from_pip(refresh=True)
    assert isinstance(index, RecordingIndex)
    index.seen = {}
    with tempfile.TemporaryDirectory() as cache:  # every METADATA read from the index, none from a cache
        reader = RecordingReader(cache=Path(cache))
        reader.texts = {}
        versions = audit.releases(index, family, None, args.since)
        results = audit.audit(family, release, index, versions, reader=reader)
    listings = {project: [{"filename": f.filename, "upload-time": f.upload_time, "yanked": f.yanked,
                           "requires-python": f.requires_python, "size": f.size} for f in listing.files]
                for project, listing in sorted(index.seen.items())}
    record = {"since": args.since, "listings": listings, "metadata": reader.texts,
              "findings": audit.to_json(results)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=OUT.parent, prefix=".index.")
    with os.fdopen(handle, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        packed.write(json.dumps(record, indent=0, sort_keys=True).encode())
    os.replace(temporary, OUT)
    count = sum(len(r.findings) for r in results)
    print(f"{OUT.relative_to(ROOT)}: {len(listings)} listings, {len(reader.texts)} METADATA, {count} findings, "
          f"{OUT.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
