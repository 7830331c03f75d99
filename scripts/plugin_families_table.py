"""Measure the hardware plugin families of every jax release since 0.4.30, from its METADATA.

For each final jax release: its extras that bring a plugin or runtime (jaxrel.distributions.extras),
their pins, and whether the index pip uses satisfies them today. METADATA is read from the
index's PEP 658 ``.metadata`` file where offered, else from the (small, pure) wheel.

    python scripts/plugin_families_table.py   # the table in docs/plugins.md
"""

from __future__ import annotations

import sys
import urllib.request
import zipfile
from email.parser import BytesParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.version import Version  # noqa: E402

from jaxrel.distributions.extras import extras_of, plugin_families, unsatisfied_extras  # noqa: E402
from jaxrel.distributions.index import Index, IndexFile  # noqa: E402
from jaxrel.family import jax_profile  # noqa: E402

FIRST = Version("0.4.30")
DATE = "2026-11-23"


def requires_dist(index: Index, file: IndexFile) -> list[str]:
    """``Requires-Dist`` of a wheel: from its ``.metadata`` file, else from the wheel itself."""
    data: bytes | None = None
    if file.url.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(file.url.split("#")[0] + ".metadata", timeout=60) as response:
                data = response.read()
        except OSError:
            data = None
    if data is None:
        with zipfile.ZipFile(index.download(file)) as wheel:
            name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            data = wheel.read(name)
    return BytesParser().parsebytes(data).get_all("Requires-Dist") or []


def main() -> int:
    family = jax_profile()
    index = Index.from_pip()
    jax = index.listing("jax")
    rows = []
    listings = {}
    for version in [v for v in jax.versions() if v >= FIRST and not v.is_prerelease]:
        wheel = next((f for f in jax.files_for(version) if f.filename.endswith("-py3-none-any.whl")), None)
        if wheel is None:
            continue
        requires = requires_dist(index, wheel)
        families = plugin_families(family, requires)
        for distribution in {d for f in families.values() for d in f.distributions} | {"jaxlib"}:
            if distribution not in listings:
                listings[distribution] = index.listing(distribution)
        missing = {(u.extra, u.requirement): u for u in unsatisfied_extras(family, requires, listings)}
        extras = extras_of(requires)
        for plugin_family in families.values():
            pins = "; ".join(f"{d}{s}" for d, s in plugin_family.specifiers if d != "jaxlib")
            problems = {u.requirement: u for (extra, _), u in missing.items() if extra in plugin_family.extras}
            status = ("yes" if not problems else "no: " + ", ".join(
                f"{u.requirement} (newest {u.newest or 'none'})" for u in problems.values()))
            jaxlib = next((str(r.specifier) for e in plugin_family.extras for r in extras[e]
                           if r.name == "jaxlib"), "")
            rows.append((str(version), plugin_family.name, ", ".join(plugin_family.extras), pins,
                         jaxlib, status))
    print(f"Measured {DATE} with `python scripts/plugin_families_table.py` (index: the one pip uses).\n")
    print("| jax | family | extras | plugin/runtime pin | jaxlib in the extra | index satisfies |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") or "–" for cell in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
