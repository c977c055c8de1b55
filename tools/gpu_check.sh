#!/usr/bin/env bash
# The GPU check: builds the CUDA tests and the GPU benchmark, runs the tests (then again under
# compute-sanitizer's memcheck where it works), runs the benchmark, and writes one results file.
#
#   tools/gpu_check.sh [OUT_DIR]          on a GPU machine set up with tools/setup.sh (Bazel there)
#   tools/gpu_check.sh pack BUNDLE_DIR    here, without a GPU: build and bundle the binaries and the
#                                         Debian libraries they need (not CUDA's own)
#   tools/gpu_check.sh run BUNDLE_DIR [OUT_DIR]
#                                         on a GPU machine without Bazel: run a packed bundle
# The whole check is meant to finish within 5 minutes on an H100/H200. Exit status: non-zero when a
# test fails. OUT_DIR (default gpu-results/) receives results.txt and the raw logs.
set -uo pipefail
cd "$(dirname "$0")/.."

TEST_PATTERN="tests(//tests/core/cuda/... + //tests/kernels/cuda/...)"
BENCH_TARGET=//tools/bench:bench

gpu_tests() { bazel query --noshow_progress "$TEST_PATTERN" 2>/dev/null; }

build() {  # the CUDA test binaries and the benchmark, Tessera's own libraries linked in statically
  bazel build --noshow_progress --dynamic_mode=off $(gpu_tests) "$BENCH_TARGET"
}

binary_of() {  # //a/b:c -> bazel-bin/a/b/c
  local label=${1#//}
  echo "$(bazel info bazel-bin 2>/dev/null)/${label%%:*}/${label##*:}"
}

pack() {  # pack DIR: binaries + torch peer + every non-CUDA shared library they load
  local dir=$1 t
  build || exit 1
  rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/tests"
  for t in $(gpu_tests); do cp "$(binary_of "$t")" "$dir/tests/"; done
  cp "$(binary_of $BENCH_TARGET)" tools/bench/torch_peer.py "$dir/"
  chmod -R u+w "$dir" && strip "$dir"/tests/* "$dir/bench"
  # Debian's libraries (MPI, spdlog, fmt, OpenMP, ...) travel; the CUDA driver and toolkit
  # libraries and the C library come from the GPU machine.
  ldd "$dir"/tests/* "$dir/bench" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libcuda\.so|/usr/local/cuda|nvidia' |
    while read -r lib; do cp -L "$lib" "$dir/lib/"; done
  cp tools/gpu_check.sh "$dir/"
  du -sh "$dir"
}

cuda_library_path() {  # the GPU machine's CUDA libraries: the toolkit's, then pip's nvidia wheels
  local paths=/usr/local/cuda/lib64
  local site
  site=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null) &&
    paths="$paths:$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')"
  echo "$paths"
}

run_checks() {  # run_checks TEST_DIR BENCH PEER OUT: every test binary in TEST_DIR
  local tests=$1 bench=$2 peer=$3 out=$4 status=0 t name rc
  mkdir -p "$out"
  local results="$out/results.txt"
  {
    echo "# Tessera GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    echo
    echo "## GPU tests"
  } >"$results"
  for t in "$tests"/*; do
    name=$(basename "$t")
    timeout 60 "$t" --reporter compact >"$out/$name.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    echo "$name: $([ $rc -eq 0 ] && echo PASSED || echo "FAILED (exit $rc)") | $(tail -n 1 "$out/$name.log")" >>"$results"
  done
  if command -v compute-sanitizer >/dev/null; then
    echo "## GPU tests under compute-sanitizer (memcheck)" >>"$results"
    for t in "$tests"/*; do
      name=$(basename "$t")
      timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 "$t" --reporter compact \
        >"$out/$name.memcheck.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1
      echo "$name: $(case $rc in 0) echo clean ;; 124) echo "stopped after 60 s" ;; *) echo "FAILED (exit $rc)" ;; esac) | $(grep -m1 "ERROR SUMMARY" "$out/$name.memcheck.log")" >>"$results"
    done
  else
    echo "## compute-sanitizer: not installed, skipped" >>"$results"
  fi
  echo "## GPU benchmark" >>"$results"
  timeout 150 "$bench" cuda --peer "$peer" >"$out/bench.log" 2>&1 || echo "(benchmark failed)" >>"$results"
  cat "$out/bench.log" >>"$results"
  cat "$results"
  return $status
}

case "${1:-}" in
  pack)
    pack "${2:?usage: tools/gpu_check.sh pack BUNDLE_DIR}"
    ;;
  run)
    dir=${2:?usage: tools/gpu_check.sh run BUNDLE_DIR [OUT_DIR]}
    export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    run_checks "$dir/tests" "$dir/bench" "$dir/torch_peer.py" "${3:-gpu-results}"
    ;;
  *)
    bash tools/setup.sh
    build || exit 1
    tests=$(mktemp -d)
    for t in $(gpu_tests); do ln -s "$(binary_of "$t")" "$tests/"; done
    run_checks "$tests" "$(binary_of $BENCH_TARGET)" tools/bench/torch_peer.py "${1:-gpu-results}"
    ;;
esac
