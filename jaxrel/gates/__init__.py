"""Api-version gates in a frontend's source: find (ast; names resolves imports), judge, fix (libcst on
slices; imports decides which imports may go; verify checks the rewritten tree), cover, report."""
