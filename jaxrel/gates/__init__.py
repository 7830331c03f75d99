"""Api-version gates in a frontend's source: find (ast), judge, fix (libcst), cover, report."""
