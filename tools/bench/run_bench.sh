#!/usr/bin/env bash
# Runs the GPT-2 124M kernel table: Tessera vs PyTorch eager on the CPU, measured in one run.
#
#   tools/bench/run_bench.sh                      # all cases, TESSERA_NUM_THREADS or all cores
#   tools/bench/run_bench.sh --threads 2 --filter attention
#
# Arguments go to `bench kernels` (--threads N, --quick, --filter S, --no-peer).
# What makes the peer fair:
#  - Debian's python3-torch links the generic libblas.so.3; without OpenBLAS that is the reference
#    BLAS, about 30x slower. libopenblas0-openmp (installed by tools/setup.sh) switches it.
#  - OpenBLAS 0.3.21 detects CPUs newer than itself as its SSE3 "Prescott" (an Emerald Rapids Xeon
#    here: 64 instead of 300 GFLOP/s), so the bench pins the peer's OPENBLAS_CORETYPE to the host
#    ISA's kernels (SkylakeX with AVX-512, Haswell with AVX2) and prints the family it ran.
#  - Both sides use the same thread count (torch.set_num_threads and OMP_NUM_THREADS).
#  - The peer runs with /usr/bin/python3: the `python3` first on PATH may not see python3-torch.
# Benchmarks on a shared machine are noisy: the header line prints the load average.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${TESSERA_SKIP_SETUP:-0}" != 1 ] && [ -x tools/setup.sh ]; then
  tools/setup.sh
fi

blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *) echo "run_bench: warning: libblas.so.3 is '${blas:-missing}', not OpenBLAS: PyTorch's GEMMs" \
          "will be far slower than a real install (apt-get install libopenblas0-openmp)" >&2 ;;
esac
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "run_bench: /usr/bin/python3 cannot import torch (apt-get install python3-torch);" \
       "the table will have Tessera's columns only" >&2
fi

output_base=()
[ -n "${TESSERA_BAZEL_OUTPUT_BASE:-}" ] && output_base=(--output_base="$TESSERA_BAZEL_OUTPUT_BASE")
bazel "${output_base[@]}" build //tools/bench:bench
bin_dir=$(bazel "${output_base[@]}" info bazel-bin 2>/dev/null)
exec "$bin_dir/tools/bench/bench" kernels "$@"
