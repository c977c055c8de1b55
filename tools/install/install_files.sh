#!/usr/bin/env bash
# Installs a built //:libtessera into PREFIX for projects that do not build with Bazel:
#   PREFIX/include/tessera/...                the public headers (-IPREFIX/include/tessera)
#   PREFIX/lib/libtessera.a                   every layer (the CUDA objects when built with CUDA)
#   PREFIX/lib/pkgconfig/tessera.pc           pkg-config --cflags --libs [--static] tessera
#   PREFIX/lib/cmake/Tessera/TesseraConfig.cmake   find_package(Tessera) -> Tessera::tessera
# The copy step shared by tools/install.sh (after `bazel build //:libtessera`) and the install test
# (from the same files as test data). Idempotent: the headers are replaced as a whole, so a header
# removed from the tree leaves the prefix too.
#
# Usage: install_files.sh --root DIR --package DIR PREFIX
#   --root     directory the header paths of libtessera.headers are relative to (the workspace)
#   --package  directory that holds libtessera.a, libtessera.headers and libtessera.flags
set -euo pipefail

usage() {
  echo "usage: $0 --root DIR --package DIR PREFIX" >&2
  exit 2
}

root="" package="" prefix=""
while (($#)); do
  case $1 in
    --root) root=${2:?}; shift 2 ;;
    --package) package=${2:?}; shift 2 ;;
    -*) usage ;;
    *) [ -z "$prefix" ] || usage; prefix=$1; shift ;;
  esac
done
if [ -z "$root" ] || [ -z "$package" ] || [ -z "$prefix" ]; then usage; fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
archive=$package/libtessera.a
headers=$package/libtessera.headers
flags=$package/libtessera.flags
for f in "$archive" "$headers" "$flags" "$here/tessera.pc.in" "$here/TesseraConfig.cmake.in"; do
  [ -f "$f" ] || { echo "install: missing $f" >&2; exit 1; }
done

# The flags file: key=value lines written by tools/bazel/static_package.bzl.
flag() {
  local line
  line=$(grep -m1 "^$1=" "$flags") || { echo "install: $flags lacks $1" >&2; exit 1; }
  printf '%s' "${line#*=}"
}
defines=$(flag defines)
include_flags=$(flag include_flags)
link_flags=$(flag link_flags)
whole_archive=$(flag whole_archive)
cuda=$(flag cuda)

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
incdir=$prefix/include/tessera
libdir=$prefix/lib

# Headers: staged next to the destination, then swapped in, so a failed copy leaves the old tree.
stage=$(mktemp -d "$prefix/.tessera-include.XXXXXX")
trap 'rm -rf "$stage"' EXIT
count=0
while IFS= read -r path; do
  [ -n "$path" ] || continue
  [ -f "$root/$path" ] || { echo "install: header $root/$path not found" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$path")"
  cp -L "$root/$path" "$stage/$path"
  chmod 644 "$stage/$path"
  count=$((count + 1))
done < "$headers"
mkdir -p "$prefix/include"
rm -rf "$incdir"
mv "$stage" "$incdir"
chmod 755 "$incdir"
trap - EXIT

mkdir -p "$libdir/pkgconfig" "$libdir/cmake/Tessera"
install -m 644 "$archive" "$libdir/libtessera.a"

# Objects that register themselves from static constructors (alwayslink in Bazel, e.g. the CUDA
# allocator) are never pulled from an archive by a reference, so the whole archive is linked then.
# (${_tessera_prefix} is CMake's, expanded by TesseraConfig.cmake.)
# shellcheck disable=SC2016
if [ "$whole_archive" = 1 ]; then
  pc_lib='-Wl,--whole-archive -ltessera -Wl,--no-whole-archive'
  cmake_lib='-Wl,--whole-archive;${_tessera_prefix}/lib/libtessera.a;-Wl,--no-whole-archive'
else
  pc_lib='-ltessera'
  cmake_lib='${_tessera_prefix}/lib/libtessera.a'
fi

# CMake lists: "-DX -DY" -> "X;Y", "-I/a -I/b" -> "/a;/b", "-La -lb" -> "-La;-lb".
cmake_list() {  # cmake_list STRIP WORDS...
  local strip=$1 out="" w
  shift
  for w in "$@"; do out+="${out:+;}${w#"$strip"}"; done
  printf '%s' "$out"
}
# shellcheck disable=SC2086  # the flags are space-separated words by construction
cmake_defines=$(cmake_list -D $defines)
# shellcheck disable=SC2086
cmake_includes=$(cmake_list -I $include_flags)
# shellcheck disable=SC2086
cmake_link=$(cmake_list "" $link_flags)

fill() {  # fill TEMPLATE OUTPUT: replaces the @KEY@ placeholders
  local text
  text=$(<"$1")
  text=${text//@PREFIX@/"$prefix"}
  text=${text//@DEFINES@/"$defines"}
  text=${text//@INCLUDE_FLAGS@/"$include_flags"}
  text=${text//@PC_LIB@/"$pc_lib"}
  text=${text//@LINK_FLAGS@/"$link_flags"}
  text=${text//@CMAKE_DEFINES@/"$cmake_defines"}
  text=${text//@CMAKE_INCLUDES@/"$cmake_includes"}
  text=${text//@CMAKE_LIB@/"$cmake_lib"}
  text=${text//@CMAKE_LINK@/"$cmake_link"}
  text=${text//@CUDA@/"$cuda"}
  printf '%s\n' "$text" > "$2.tmp"
  chmod 644 "$2.tmp"
  mv "$2.tmp" "$2"
}
fill "$here/tessera.pc.in" "$libdir/pkgconfig/tessera.pc"
fill "$here/TesseraConfig.cmake.in" "$libdir/cmake/Tessera/TesseraConfig.cmake"

echo "install: $count headers, libtessera.a ($( [ "$cuda" = 1 ] && echo "with CUDA" || echo "CPU only")), tessera.pc and TesseraConfig.cmake in $prefix"
