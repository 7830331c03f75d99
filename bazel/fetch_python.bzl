"""The Python the fetching repository rules run their scripts with (pip downloads, unpacking).

`$JAXREL_FETCH_PYTHON` (jaxrel build passes the interpreter running jaxrel), else `$PYTHON_BIN_PATH` (the
Python the wheels are built for), else `python3` on `PATH`. A separate variable because the Python a wheel is
built for need not run here natively, nor have pip (an aarch64 Python under qemu-user, bazel/python.bzl).
What the rules fetch is pinned by sha256 and does not depend on the interpreter, so only a changed
`JAXREL_FETCH_PYTHON` re-runs them (building for another Python does not fetch again).
"""

FETCH_PYTHON_ENV = ["JAXREL_FETCH_PYTHON"]

def fetch_python(rctx, rule):
    """The fetch interpreter's path; fails naming `rule` and the fix when there is none."""
    for name in ["JAXREL_FETCH_PYTHON", "PYTHON_BIN_PATH"]:
        if rctx.os.environ.get(name):
            return rctx.os.environ[name]
    python = rctx.which("python3")
    if not python:
        fail("%s: no Python found. Fix: pass --repo_env=JAXREL_FETCH_PYTHON=/path/to/python3." % rule)
    return python
