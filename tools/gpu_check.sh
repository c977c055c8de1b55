#!/usr/bin/env bash
# The GPU check: builds the CUDA tests and the GPU benchmark, runs the tests (then again under
# compute-sanitizer's memcheck where it works), runs `bench cuda`, and writes one results file.
#
#   tools/gpu_check.sh [OUT_DIR]          on a GPU machine set up with tools/setup.sh (Bazel there)
#   tools/gpu_check.sh pack BUNDLE_DIR    here, without a GPU: build and bundle the binaries and the
#                                         Debian libraries they need (not CUDA's own) into
#                                         BUNDLE_DIR/payload.tar.xz (~10 MB) beside this script
#   tools/gpu_check.sh run BUNDLE_DIR [OUT_DIR]
#                                         on a GPU machine without Bazel: run a packed bundle
# The whole check finishes within 5 minutes on an H100/H200: each phase has a deadline (tests 105 s,
# memcheck 85 s, bench 95 s); what a deadline cuts short is reported as such, not as a failure.
# Exit status: non-zero when a test fails. OUT_DIR (default gpu-results/) receives results.txt and
# the raw logs. BAZEL_OUTPUT_BASE, when set, is passed to bazel as --output_base. PYTHON (default
# python3) is the interpreter with a CUDA PyTorch for the benchmark's peer.
set -uo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")/.."
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER_DIR/$1" ;; esac; }

TEST_PATTERN="tests(//tests/core/cuda/... + //tests/kernels/cuda/... + //tests/parallel/zero:host_mover)"
BENCH_TARGET=//tools/bench:bench
PEER_FILES="tools/bench/torch_peer.py tools/bench/torch_cuda_peer.py tools/bench/torch_gpt.py"
TEST_SECONDS=105 MEMCHECK_SECONDS=85 BENCH_SECONDS=95
# Bounded repetitions so the benchmark fits its deadline with PyTorch's start-up three times.
BENCH_ARGS="--warmup 2 --reps 10 --steps 3"

bazel() { command bazel ${BAZEL_OUTPUT_BASE:+--output_base="$BAZEL_OUTPUT_BASE"} "$@"; }

gpu_tests() { bazel query --noshow_progress "$TEST_PATTERN" 2>/dev/null; }

build() {  # the CUDA test binaries and the benchmark, Tessera's own libraries linked in statically
  local tests
  tests=$(gpu_tests)
  [ -n "$tests" ] || { echo "gpu_check: bazel query found no CUDA tests" >&2; return 1; }
  bazel build --noshow_progress --dynamic_mode=off $tests "$BENCH_TARGET"
}

binary_of() {  # //a/b:c -> bazel-bin/a/b/c
  local label=${1#//}
  echo "$(bazel info bazel-bin 2>/dev/null)/${label%%:*}/${label##*:}"
}

# pack DIR: binaries + torch peer + every non-CUDA shared library they load, in one xz archive
# (payload.tar.xz) beside this script. Every binary holds the same CUDA fatbins, so one solid
# archive with a window larger than a binary stores them about once: ~500 MB of files in ~10 MB.
pack() {
  local dir=$1 stage t
  build || exit 1
  stage=$(mktemp -d) && TEMP_DIRS+=("$stage") || exit 1
  mkdir -p "$stage/lib" "$stage/tests"
  for t in $(gpu_tests); do cp "$(binary_of "$t")" "$stage/tests/" || exit 1; done
  cp "$(binary_of $BENCH_TARGET)" $PEER_FILES "$stage/" || exit 1
  chmod -R u+w "$stage" && strip "$stage"/tests/* "$stage/bench" || exit 1
  # Debian's libraries (MPI, spdlog, fmt, OpenMP, ...) travel; the CUDA driver and toolkit
  # libraries and the C library come from the GPU machine.
  ldd "$stage"/tests/* "$stage/bench" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libcuda\.so|/usr/local/cuda|nvidia' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  local raw
  raw=$(du -sb "$stage" | cut -f1)
  rm -rf "$dir" && mkdir -p "$dir" || exit 1
  tar -C "$stage" -cf - . | xz -T1 --lzma2=preset=1,dict=64MiB >"$dir/payload.tar.xz" || exit 1
  cp tools/gpu_check.sh "$dir/"
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  echo "gpu_check: bundle $dir: $(ls "$stage/tests" | wc -l) test binaries + bench," \
    "$((raw / 1048576)) MiB unpacked, $((bytes / 1048576)) MiB packed ($bytes bytes)"
  if [ "$bytes" -ge $((60 * 1048576)) ]; then
    echo "gpu_check: the bundle is over 60 MiB; the device tool carries at most 64 MiB" >&2
    exit 1
  fi
}

# unpack BUNDLE_DIR: prints the directory holding the bundle's files, unpacking payload.tar.xz into
# a temporary directory first (with xz, else Python's lzma where xz is not installed).
unpack() {
  local dir=$1 work
  if [ ! -f "$dir/payload.tar.xz" ]; then echo "$dir"; return; fi
  work=$(mktemp -d) || return 1
  if command -v xz >/dev/null; then
    xz -dc "$dir/payload.tar.xz" | tar -x -C "$work" || return 1
  else
    "${PYTHON:-python3}" -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
      "$dir/payload.tar.xz" "$work" || return 1
  fi
  echo "$work"
}

cuda_library_path() {  # the GPU machine's CUDA libraries: the toolkit's, then pip's nvidia wheels
  local paths=/usr/local/cuda/lib64
  local site
  site=$("${PYTHON:-python3}" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null) &&
    paths="$paths:$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')"
  echo "$paths"
}

# peer_python OUT: a wrapper that starts the peer's interpreter with the environment the caller
# had, so the bundle's libraries (LD_LIBRARY_PATH below) never replace PyTorch's own.
peer_python() {
  local wrapper="$1/peer-python"
  {
    echo '#!/bin/sh'
    if [ -n "${ORIGINAL_LD_LIBRARY_PATH:-}" ]; then
      printf 'LD_LIBRARY_PATH=%q; export LD_LIBRARY_PATH\n' "$ORIGINAL_LD_LIBRARY_PATH"
    else
      echo 'unset LD_LIBRARY_PATH'
    fi
    printf 'exec %q "$@"\n' "$(command -v "${PYTHON:-python3}" || echo "${PYTHON:-python3}")"
  } >"$wrapper"
  chmod +x "$wrapper"
  echo "$wrapper"
}

# budget DEADLINE CAP: seconds left before DEADLINE ($SECONDS-based), at most CAP.
budget() { local left=$(($1 - SECONDS)); echo $((left < $2 ? left : $2)); }

run_checks() {  # run_checks TEST_DIR BENCH PEER OUT: every test binary in TEST_DIR
  local tests=$1 bench=$2 peer=$3 out=$4 status=0 t name rc limit deadline
  mkdir -p "$out" || return 1
  out=$(cd "$out" && pwd)
  local results="$out/results.txt"
  {
    echo "# Tessera GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    else
      echo "nvidia-smi: not installed"
    fi
    echo
    echo "## GPU tests"
  } >"$results"
  deadline=$((SECONDS + TEST_SECONDS))
  for t in "$tests"/*; do
    name=$(basename "$t")
    limit=$(budget $deadline 60)
    if [ "$limit" -lt 5 ]; then
      echo "$name: NOT RUN (the tests' ${TEST_SECONDS} s were spent)" >>"$results"
      status=1
      continue
    fi
    timeout "$limit" "$t" --reporter compact >"$out/$name.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    local summary skipped=""
    summary=$(grep -v '^[[:space:]]*$' "$out/$name.log" | tail -n 1)
    grep -q "skipped: this test needs a CUDA GPU" "$out/$name.log" && skipped=" [skipped: no GPU]"
    echo "$name: $([ $rc -eq 0 ] && echo PASSED || echo "FAILED (exit $rc)")$skipped | $summary" >>"$results"
  done
  if command -v compute-sanitizer >/dev/null; then
    echo "## GPU tests under compute-sanitizer (memcheck, ${MEMCHECK_SECONDS} s in all)" >>"$results"
    deadline=$((SECONDS + MEMCHECK_SECONDS))
    for t in "$tests"/*; do
      name=$(basename "$t")
      limit=$(budget $deadline 60)
      if [ "$limit" -lt 5 ]; then
        echo "$name: not run (memcheck time spent)" >>"$results"
        continue
      fi
      timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 3 "$t" --reporter compact \
        >"$out/$name.memcheck.log" 2>&1
      rc=$?
      if grep -qi "device not supported" "$out/$name.memcheck.log"; then
        # Some GPU sandboxes (gVisor) refuse the sanitizer outright: nothing to check there.
        echo "compute-sanitizer refuses this device ('Device not supported'): memcheck skipped" >>"$results"
        break
      fi
      [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1
      echo "$name: $(case $rc in 0) echo clean ;; 124) echo "stopped after $limit s" ;; *) echo "FAILED (exit $rc)" ;; esac) | $(grep -m1 "ERROR SUMMARY" "$out/$name.memcheck.log")" >>"$results"
    done
  else
    echo "## compute-sanitizer: not installed, skipped" >>"$results"
  fi
  echo "## GPU benchmark (bench cuda $BENCH_ARGS)" >>"$results"
  # shellcheck disable=SC2086
  timeout "$BENCH_SECONDS" "$bench" cuda $BENCH_ARGS --peer-script "$peer" \
    --python "$(peer_python "$out")" >"$out/bench.log" 2>&1
  rc=$?
  case $rc in
    0) ;;
    2) echo "(benchmark not run: exit status 2)" >>"$results" ;;
    124) echo "(benchmark stopped after ${BENCH_SECONDS} s: the sections below are those it finished)" >>"$results" ;;
    *) echo "(benchmark failed: exit status $rc)" >>"$results" ;;
  esac
  cat "$out/bench.log" >>"$results"
  cat "$results"
  return $status
}

ORIGINAL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
TEMP_DIRS=()
cleanup() { [ ${#TEMP_DIRS[@]} -eq 0 ] || rm -rf "${TEMP_DIRS[@]}"; }
trap cleanup EXIT
case "${1:-}" in
  pack)
    pack "$(abs "${2:?usage: tools/gpu_check.sh pack BUNDLE_DIR}")"
    ;;
  run)
    dir=$(cd "$(abs "${2:?usage: tools/gpu_check.sh run BUNDLE_DIR [OUT_DIR]}")" && pwd) || exit 1
    work=$(unpack "$dir") || { echo "gpu_check: cannot unpack $dir/payload.tar.xz" >&2; exit 1; }
    [ "$work" = "$dir" ] || TEMP_DIRS+=("$work")
    dir=$work
    export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_path)${ORIGINAL_LD_LIBRARY_PATH:+:$ORIGINAL_LD_LIBRARY_PATH}"
    run_checks "$dir/tests" "$dir/bench" "$dir/torch_peer.py" "$(abs "${3:-gpu-results}")"
    ;;
  *)
    bash tools/setup.sh
    build || exit 1
    tests=$(mktemp -d) && TEMP_DIRS+=("$tests")
    for t in $(gpu_tests); do ln -s "$(binary_of "$t")" "$tests/"; done
    run_checks "$tests" "$(binary_of $BENCH_TARGET)" "$PWD/tools/bench/torch_peer.py" \
      "$(abs "${1:-gpu-results}")"
    ;;
esac
