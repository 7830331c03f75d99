#!/usr/bin/env bash
# Install what `bazelisk build //...` needs on this machine kind, idempotently:
#   - Bazel 4.2.3 from Debian's bazel-bootstrap (/usr/bin/bazel-4), via apt-get;
#   - bazelisk from the npm registry, pinned in bazel/tools/package.json, into build/tools/;
#   - Chromium from Debian (the atlas page's test opens it headless), via apt-get;
#   - PostgreSQL from Debian (the history store's tests start a server of their own on loopback), via apt-get;
#   - bubblewrap from Debian (the box `jaxrel downstream` runs other people's tests in), via apt-get.
# `--bazel-only` (nox's compat, build and release sessions) installs the first two and skips Chromium,
# PostgreSQL and bubblewrap, which only the tests, benchmarks and downstream runs need.
# Prints where each tool is. Re-running is a no-op when both are present.
set -euo pipefail
usage="usage: scripts/install_build_tools.sh [--bazel-only]"
bazel_only=false
for arg in "$@"; do
  case "$arg" in
    --bazel-only) bazel_only=true ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "install_build_tools.sh: error: unknown argument '$arg'; $usage" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/build/tools"

apt_install() {  # apt_install WHAT PACKAGE: Debian's package, refreshing the lists only when the install needs it
  echo "installing $1 (Debian $2) ..." >&2
  local sudo_cmd=()
  if [[ "$(id -u)" != 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y -q "$2" >/dev/null; then
    "${sudo_cmd[@]}" apt-get update -q >/dev/null
    "${sudo_cmd[@]}" apt-get install -y -q "$2" >/dev/null
  fi
}

if [[ ! -x /usr/bin/bazel-4 ]]; then
  apt_install "Bazel 4" bazel-bootstrap
fi
if [[ "$bazel_only" == false ]] && ! command -v chromium >/dev/null 2>&1; then
  apt_install Chromium chromium
fi
if [[ "$bazel_only" == false ]] && ! command -v initdb >/dev/null 2>&1 \
    && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  apt_install PostgreSQL postgresql
fi
if [[ "$bazel_only" == false ]] && ! command -v bwrap >/dev/null 2>&1; then
  apt_install bubblewrap bubblewrap
fi

wanted="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devDependencies"]["@bazel/bazelisk"])' \
  "$root/bazel/tools/package.json")"
installed=""
if [[ -f "$tools/node_modules/@bazel/bazelisk/package.json" ]]; then
  installed="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"].lstrip("v"))' \
    "$tools/node_modules/@bazel/bazelisk/package.json")"
fi
if [[ "$installed" != "$wanted" ]]; then
  echo "installing bazelisk $wanted (npm @bazel/bazelisk) ..." >&2
  mkdir -p "$tools"
  cp "$root/bazel/tools/package.json" "$tools/package.json"
  npm install --prefix "$tools" --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "bazel: /usr/bin/bazel-4 (bazel-bootstrap $(dpkg-query -W -f '${Version}' bazel-bootstrap 2>/dev/null))"
echo "bazelisk: $tools/node_modules/.bin/bazelisk ($wanted)"
if [[ "$bazel_only" == false ]]; then
  echo "chromium: $(command -v chromium) ($(dpkg-query -W -f '${Version}' chromium 2>/dev/null))"
  echo "bubblewrap: $(command -v bwrap) ($(dpkg-query -W -f '${Version}' bubblewrap 2>/dev/null))"
fi
