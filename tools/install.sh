#!/usr/bin/env bash
# Builds the static library with Bazel and installs it for projects that do not build with Bazel:
# headers under PREFIX/include/tessera, PREFIX/lib/libtessera.a, a pkg-config file and a CMake
# package (tools/install/install_files.sh lists them). Idempotent.
# Usage: tools/install.sh PREFIX [bazel build options, e.g. --config=cpu for a build without CUDA]
set -euo pipefail

if [ $# -lt 1 ] || [[ $1 == -* ]]; then
  echo "usage: $0 PREFIX [bazel build options]" >&2
  exit 2
fi
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/.."

bazel build "$@" //:libtessera
bin=$(bazel info "$@" bazel-bin)
bash tools/install/install_files.sh --root . --package "$bin" "$prefix"
