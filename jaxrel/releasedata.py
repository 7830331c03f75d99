"""Release data shipped with jaxrel for built-in profiles (standard library only).

``data/<profile>.json`` records, per backend release, the API numbers and XLA FFI
API version measured from the real wheels on the package index, with each wheel's
sha256 (see ``scripts/measure_release_data.py``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from jaxrel._util import localfiles

__all__ = ["api_numbers", "builtin", "first_release_with_ffi_api", "numbers", "xla_commits"]

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@cache
def builtin(profile: str) -> dict[str, Any]:
    """The shipped release data of a built-in profile: ``{"jaxlib": {...}, "jax": {...}}``."""
    data: dict[str, Any] = localfiles.load_json(os.path.join(_DATA, f"{profile}.json"), what="jaxrel's release data")
    return data


def numbers(rows: dict[str, dict[str, Any]], name: str) -> dict[str, int]:
    """Backend version → API number ``name``, for the rows where it is known."""
    return {version: row[name] for version, row in rows.items() if isinstance(row.get(name), int)}


def api_numbers(profile: str, backend: str, name: str) -> dict[str, int]:
    """Backend version → API number ``name`` for every release of a built-in profile."""
    return numbers(builtin(profile).get(backend, {}), name)


@cache
def xla_commits(profile: str, backend: str) -> dict[str, str]:
    """Backend version → the XLA commit it was built from, where known (``data/<profile>_xla_commits.json``)."""
    path = os.path.join(_DATA, f"{profile}_xla_commits.json")
    if not os.path.exists(path):
        return {}
    commits: dict[str, str] = localfiles.load_json(path, what="jaxrel's release data").get(backend, {})
    return commits


def _api_key(api: str) -> tuple[int, ...]:
    """An XLA FFI API version (``MAJOR.MINOR``, not a release) as comparable ints."""
    return tuple(int(part) for part in api.split("."))


def first_release_with_ffi_api(profile: str, backend: str, api: str) -> str | None:
    """The lowest backend release whose XLA FFI API is at least ``api`` (``"0.3"``); ``None`` if none."""
    from jaxrel import policy  # packaging: not for the runtime gating that also reads this data

    wanted = _api_key(api)
    providing = [version for version, row in builtin(profile).get(backend, {}).items()
                 if row.get("xla_ffi_api") and _api_key(row["xla_ffi_api"]) >= wanted]
    return min(providing, key=lambda v: policy.release_key(policy.parse_version(v)), default=None)
