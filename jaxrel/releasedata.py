"""Release data shipped with jaxrel for built-in profiles (standard library only).

``data/<profile>.json`` records, per backend release, the API numbers and XLA FFI
API version measured from the real wheels on the package index, with each wheel's
sha256 (see ``scripts/measure_release_data.py``).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@cache
def builtin(profile: str) -> dict[str, Any]:
    """The shipped release data of a built-in profile: ``{"jaxlib": {...}, "jax": {...}}``."""
    with open(os.path.join(_DATA, f"{profile}.json"), encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def numbers(rows: dict[str, dict[str, Any]], name: str) -> dict[str, int]:
    """Backend version → API number ``name``, for the rows where it is known."""
    return {version: row[name] for version, row in rows.items() if isinstance(row.get(name), int)}


def api_numbers(profile: str, backend: str, name: str) -> dict[str, int]:
    """Backend version → API number ``name`` for every release of a built-in profile."""
    return numbers(builtin(profile).get(backend, {}), name)
