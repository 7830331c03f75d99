#!/usr/bin/env bash
# A free-threaded CPython (PEP 703: ./configure --disable-gil) built from Debian's own source package, for jaxrel's
# cells on the ABI axis (`--python 3.13t`). Prints the interpreter, e.g.
#
#   scripts/free_threaded_python.sh 3.13            # -> ~/.cache/jaxrel/free-threaded/cpython-3.13.5t-<digest>/bin/python3.13t
#   scripts/free_threaded_python.sh 3.14 forky      # a later CPython, from the Debian suite that carries it
#
# The source comes through apt from this machine's own Debian mirror (its URL read from apt's configured sources at
# run time, none written here), with a private apt state under the cache holding one deb-src line for SUITE (default:
# trixie for 3.13), verified the way apt verifies any package: the suite's InRelease against Debian's archive keyring,
# the source files against the Sources index's checksums (apt-get source refuses a mismatch). The build lands in
# jaxrel's cache ($JAXREL_CACHE_DIR, else $XDG_CACHE_HOME/jaxrel, else ~/.cache/jaxrel) keyed by the .dsc's digest and
# the configure flags: a second run finds it and builds nothing. Exit 3 when the source cannot be had or the build
# fails, with the step and its log's last line.
set -euo pipefail
version="${1:?usage: free_threaded_python.sh VERSION [SUITE]   (e.g. 3.13, or 3.14 forky)}"
[[ "$version" =~ ^3\.[0-9]+$ ]] || { echo "free_threaded_python.sh: $version: expected a CPython version such as 3.13" >&2; exit 2; }
case "$version" in
  3.13) default_suite=trixie ;;
  *) default_suite="" ;;
esac
suite="${2:-$default_suite}"
[[ -n "$suite" ]] || { echo "free_threaded_python.sh: which Debian suite carries python$version? pass it: free_threaded_python.sh $version SUITE" >&2; exit 2; }
flags=(--disable-gil --enable-shared --with-ensurepip=install --without-static-libpython)
fail() { echo "free_threaded_python.sh: $1" >&2; exit 3; }

cache="${JAXREL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/jaxrel}/free-threaded"
mkdir -p "$cache"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -r "$keyring" ]] || fail "no Debian archive keyring at $keyring: apt-get install debian-archive-keyring"

# The one Debian mirror this machine's apt uses (its main archive, not -security or -updates).
mirror="$(apt-get indextargets --format '$(ORIGIN) $(RELEASE) $(REPO_URI)' 2>/dev/null \
  | awk '$1 == "Debian" && $2 !~ /-(security|updates|backports)$/ {print $3; exit}')"
[[ -n "$mirror" ]] || fail "no Debian mirror among apt's sources (apt-get indextargets lists none); run apt-get update"

apt_dir="$cache/apt-$suite"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$apt_dir/src"
echo "deb-src [signed-by=$keyring] $mirror $suite main" >"$apt_dir/sources.list"
: >"$apt_dir/status"
cat >"$apt_dir/apt.conf" <<EOF
Dir::Etc::SourceList "$apt_dir/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$apt_dir/lists";
Dir::State::status "$apt_dir/status";
Dir::Cache "$apt_dir/cache";
APT::Sandbox::User "root";
Acquire::http::Timeout "60";
EOF
export APT_CONFIG="$apt_dir/apt.conf" DEBIAN_FRONTEND=noninteractive
echo "reading Debian $suite's source index ..." >&2
if ! apt-get update -q >"$apt_dir/update.log" 2>&1; then
  built="$(ls -d "$cache"/cpython-"$version".*t-*/bin/python"$version"t 2>/dev/null | tail -1)"
  if [[ -n "$built" ]] && "$built" -c 'import sys; sys.exit(sys._is_gil_enabled())' 2>/dev/null; then
    echo "free_threaded_python.sh: $suite's index cannot be read ($(tail -1 "$apt_dir/update.log")); using the build here" >&2
    echo "$built"
    exit 0
  fi
  fail "apt-get update of $suite's sources failed ($(tail -1 "$apt_dir/update.log"))"
fi
dsc_line="$(apt-get source --print-uris "python$version" 2>"$apt_dir/uris.log" | grep -E "\.dsc' " | head -1)" \
  || fail "Debian $suite has no source package python$version ($(tail -1 "$apt_dir/uris.log")); pass the suite that does"
dsc_name="$(awk '{print $2}' <<<"$dsc_line")"
dsc_sha="$(awk '{print $4}' <<<"$dsc_line" | sed 's/^SHA256://')"
upstream="$(sed -E "s/^python$version\_([0-9.]+)-.*/\1/" <<<"$dsc_name")"
key="cpython-${upstream}t-$(printf '%s %s' "$dsc_sha" "${flags[*]}" | sha256sum | cut -c1-12)"
prefix="$cache/$key"
python="$prefix/bin/python${version}t"
if [[ -x "$python" ]] && "$python" -c 'import sys; sys.exit(sys._is_gil_enabled())' 2>/dev/null; then
  echo "$python"
  exit 0
fi

build_deps=(build-essential libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev)
missing=()
for package in "${build_deps[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then  # Debian's own packages, from the system's apt (not the private state above)
  echo "installing the build's Debian packages: ${missing[*]} ..." >&2
  sudo_cmd=()
  [[ "$(id -u)" == 0 ]] || sudo_cmd=(sudo)
  (unset APT_CONFIG; export DEBIAN_FRONTEND=noninteractive
   "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
     || { "${sudo_cmd[@]}" apt-get update -q >/dev/null 2>&1 && "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}" >/dev/null; }) \
    || fail "could not install ${missing[*]} with apt-get"
fi
echo "downloading python$version's source ($dsc_name, verified against $suite's index) ..." >&2
(cd "$apt_dir/src" && rm -rf ./* && apt-get source -q --download-only "python$version" >"$apt_dir/source.log" 2>&1) \
  || fail "apt-get source python$version failed ($(tail -1 "$apt_dir/source.log"))"
orig="$(ls "$apt_dir"/src/python"$version"_*.orig.tar.* | head -1)"
work="$cache/build-$key"
rm -rf "$work" "$prefix"
mkdir -p "$work"
tar -xf "$orig" -C "$work" --strip-components=1
echo "building CPython $upstream free-threaded (${flags[*]}) into $prefix; about 5 minutes on 2 cores ..." >&2
(cd "$work" && ./configure --prefix="$prefix" "${flags[@]}" LDFLAGS="-Wl,-rpath,$prefix/lib" >"$work/configure.log" 2>&1) \
  || fail "configure failed ($(tail -1 "$work/configure.log")); its log: $work/configure.log"
(cd "$work" && make -j"$(nproc)" >"$work/make.log" 2>&1 && make install >"$work/install.log" 2>&1) \
  || fail "the build failed ($(tail -1 "$work/make.log")); its log: $work/make.log"
"$python" -c 'import ssl, zlib, ctypes, sqlite3, lzma, bz2, sys; sys.exit(sys._is_gil_enabled())' \
  || fail "$python runs with the GIL or lacks a module (ssl, zlib, ctypes, sqlite3, lzma, bz2): see $work/make.log"
rm -rf "$work"
echo "$python"
