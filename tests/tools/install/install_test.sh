#!/usr/bin/env bash
# Installs //:libtessera (test data) into a temporary prefix with tools/install/install_files.sh,
# the copy step of tools/install.sh, and uses it as an outside project would:
#   - the prefix: public headers only, none reaching mpi.h, every one compiling with the installed
#     flags; no Tessera symbol left undefined by libtessera.a; a second install gives the same tree;
#   - outside_train.cc built with g++ and pkg-config trains a tiny GPT (the loss must fall);
#   - outside_hf_gpt2.cc built with CMake (find_package(Tessera)) loads Hugging Face-layout GPT-2
#     weights and prints a finite loss, equal to that of the model that wrote them.
set -euo pipefail

ws=$TEST_SRCDIR/$TEST_WORKSPACE
here=$ws/tests/tools/install
tmp=${TEST_TMPDIR:-$(mktemp -d)}
prefix=$tmp/prefix
export TESSERA_NUM_THREADS=${TESSERA_NUM_THREADS:-2}
# Outside programs compile at -O1: the library is optimised already, and this keeps the test short.
CXXFLAGS_OUTSIDE="-O1"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
ok() { echo "ok: $*"; }

install_prefix() {
  bash "$ws/tools/install/install_files.sh" --root "$ws" --package "$ws" "$prefix"
}
tree_sum() { (cd "$prefix" && find . -type f | sort | xargs sha256sum); }

# --- install, twice: the same tree, and a stale header is removed -------------------------------
install_prefix
first=$(tree_sum)
touch "$prefix/include/tessera/stale_header.h"
install_prefix
[ "$(tree_sum)" = "$first" ] || fail "a second install changed the prefix (or kept a stale header)"
ok "install is idempotent"

inc=$prefix/include/tessera
for h in tessera.h models/gpt/gpt.h models/hf/load_hf.h models/train/trainer.h \
  parallel/comm/mpi_runtime.h parallel/comm/mpi_communicator.h; do
  [ -f "$inc/$h" ] || fail "header $h not installed"
done
for h in parallel/comm/mpi_check.h parallel/comm/mpi_work.h parallel/comm/mpi_handle.h; do
  [ ! -e "$inc/$h" ] || fail "internal header $h installed"
done
[ -f "$prefix/lib/libtessera.a" ] || fail "libtessera.a not installed"
[ -f "$prefix/lib/pkgconfig/tessera.pc" ] || fail "tessera.pc not installed"
[ -f "$prefix/lib/cmake/Tessera/TesseraConfig.cmake" ] || fail "TesseraConfig.cmake not installed"
ok "headers, archive, tessera.pc and TesseraConfig.cmake installed"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cflags=$(pkg-config --cflags tessera)
libs=$(pkg-config --libs --static tessera)
cuda=$(grep -m1 '^cuda=' "$ws/libtessera.flags" | cut -d= -f2)
if [ "$cuda" = 1 ]; then
  for lib in -lcudart -lnccl; do
    [[ " $libs " == *" $lib "* ]] || fail "a CUDA build's tessera.pc lacks $lib: $libs"
  done
  # cuBLASLt is loaded when the first GPU GEMM runs; linking it would cost every process its
  # start-up initialisation.
  [[ " $libs " != *" -lcublas"* ]] || fail "tessera.pc links cuBLAS, which is loaded on first use: $libs"
fi
ok "pkg-config: $cflags $libs"

# --- no public header reaches mpi.h; every header compiles with the installed flags -------------
# (.cuh files and the CUDA kernel headers are for nvcc.)
(cd "$inc" && find . -name '*.h' -not -path './kernels/cuda/*' | sed 's|^\./||' | sort) \
  >"$tmp/headers.txt"
sed 's|.*|#include "&"|' "$tmp/headers.txt" >"$tmp/all_headers.cc"
# shellcheck disable=SC2086
g++ -std=c++20 -E $cflags "$tmp/all_headers.cc" -o "$tmp/all_headers.i" ||
  fail "the public headers do not preprocess with the installed flags"
if grep -E '^# [0-9]+ "[^"]*/mpi\.h"' "$tmp/all_headers.i" | head -3 | grep .; then
  fail "a public header includes mpi.h (the lines above)"
fi
# shellcheck disable=SC2086
g++ -std=c++20 -fsyntax-only $cflags "$tmp/all_headers.cc" ||
  fail "the public headers do not compile together"
# tessera.h on its own needs no MPI include directory.
echo '#include "tessera.h"' >"$tmp/umbrella.cc"
g++ -std=c++20 -fsyntax-only -I"$inc" "$tmp/umbrella.cc" ||
  fail "tessera.h needs more than -I$inc"
ok "$(wc -l <"$tmp/headers.txt") public headers compile; none includes mpi.h"

# --- every Tessera symbol the archive references, it defines ------------------------------------
archive=$prefix/lib/libtessera.a
nm -P --defined-only "$archive" 2>/dev/null | awk 'NF >= 2 && $2 ~ /^[TDBRGSVWiu]$/ {print $1}' |
  sort -u >"$tmp/defined.txt"
nm -P -u "$archive" 2>/dev/null | awk 'NF >= 2 && $2 == "U" {print $1}' | sort -u >"$tmp/undefined.txt"
[ -s "$tmp/defined.txt" ] || fail "nm found no symbols in $archive"
comm -23 "$tmp/undefined.txt" "$tmp/defined.txt" | grep 7tessera >"$tmp/missing.txt" || true
if [ -s "$tmp/missing.txt" ]; then
  c++filt <"$tmp/missing.txt" | head -20 >&2
  fail "libtessera.a references $(wc -l <"$tmp/missing.txt") Tessera symbols it lacks (above)"
fi
ok "libtessera.a defines every Tessera symbol it references"

# --- outside program 1: g++ and pkg-config, trains a tiny GPT -----------------------------------
# shellcheck disable=SC2086
g++ -std=c++20 $CXXFLAGS_OUTSIDE "$here/outside_train.cc" -o "$tmp/outside_train" $cflags $libs ||
  fail "outside_train.cc does not build with pkg-config"
rc=0
"$tmp/outside_train" >"$tmp/train.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/train.log" >&2; fail "outside_train exited $rc"; }
cat "$tmp/train.log"
grep -q "loss .* -> .* over 30 steps" "$tmp/train.log" || fail "outside_train printed no losses"
if [ "$cuda" = 1 ]; then
  grep -q "CUDA backend linked in" "$tmp/train.log" || fail "outside_train was not built for CUDA"
fi
ok "outside program (pkg-config) trained a GPT"

# --- outside program 2: CMake, loads Hugging Face GPT-2 weights ---------------------------------
project=$tmp/hf_project
mkdir -p "$project"
cp -L "$here/CMakeLists.txt" "$here/outside_hf_gpt2.cc" "$project/"
generator="Unix Makefiles"
command -v ninja >/dev/null && generator=Ninja
cmake -S "$project" -B "$project/build" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="$CXXFLAGS_OUTSIDE" >"$tmp/cmake.log" 2>&1 || {
  cat "$tmp/cmake.log" >&2
  fail "cmake could not configure against the prefix"
}
cmake --build "$project/build" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  fail "outside_hf_gpt2.cc does not build with CMake"
}
mkdir -p "$tmp/hf"
rc=0
"$project/build/outside_hf_gpt2" "$tmp/hf" >"$tmp/hf.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/hf.log" >&2; fail "outside_hf_gpt2 exited $rc"; }
cat "$tmp/hf.log"
[ -s "$tmp/hf/model.safetensors" ] || fail "outside_hf_gpt2 wrote no model.safetensors"
grep -qE "^loss [0-9]+\.[0-9]+ " "$tmp/hf.log" || fail "outside_hf_gpt2 printed no loss"
ok "outside program (CMake) loaded Hugging Face GPT-2 weights"

echo "PASS"
