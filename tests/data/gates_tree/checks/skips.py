"""Gates in skip decorators (a test module of the frontend; named so pytest never collects it here)."""

import unittest

import pytest
from jax._src.lib import jaxlib_extension_version as v


@pytest.mark.skipif(v >= 600, reason="not yet at HEAD")
class Skips(unittest.TestCase):
    @unittest.skipIf(v < 470, "needs jaxlib 0.11.0")
    def test_skip_if(self) -> None:
        self.assertTrue(True)

    @unittest.skipUnless(v >= 300, "needs jaxlib 0.4.38")
    def test_skip_unless(self) -> None:
        self.assertTrue(True)

    @pytest.mark.skipif(v < 300 or v >= 600, reason="out of range")
    def test_skipif(self) -> None:
        self.assertTrue(True)
