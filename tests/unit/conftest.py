"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopback_index import LoopbackIndex


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackIndex]:
    """A misbehaving package index on a loopback port (see loopback_index.py), one per test module."""
    index = LoopbackIndex()
    yield index
    index.close()
