"""splitfam's own tests: run by `jaxrel compat` against the splitfam wheel installed in each cell."""

import splitfam
from absl.testing import parameterized  # a test requirement (tests/requirements.txt), as jax's tests use it


class AddTest(parameterized.TestCase):
    @parameterized.parameters((2, 3, 5), (0.5, 0.25, 0.75), (-1, 1, 0))
    def test_add(self, a, b, total):
        self.assertEqual(splitfam.add(a, b), total)


def test_add_is_computed_by_the_core():
    import splitfam_core

    assert splitfam.add(40, 2) == splitfam_core.add(40, 2) == 42
