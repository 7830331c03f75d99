"""Keep Bazel 4.2.3 offline: stub the repositories it would otherwise download.

Call `offline_repositories()` first thing in `WORKSPACE`. It needs nothing but the stub
directories under `bazel/stubs/`; pass `prefix` if you copy them elsewhere in your repo.
"""

_STUBS = ["rules_cc", "rules_java", "remote_coverage_tools"]

def offline_repositories(prefix = "bazel/stubs"):
    """Declare each built-in downloadable repository as an empty local one."""
    for name in _STUBS:
        native.local_repository(name = name, path = prefix + "/" + name)
