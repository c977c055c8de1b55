#!/usr/bin/env bash
# Quick start: installs what is needed, builds the `tessera` CLI and trains the default GPT on the
# built-in data on ${NP:-2} data-parallel ranks (rank 0 prints progress, a sample at the end).
# Extra arguments go to `tessera train`, e.g. tools/train.sh --set train.steps=100.
#   NP=4 tools/train.sh                                   four ranks
#   CONFIG=tools/configs/vit-tiny.json tools/train.sh     another bundled config
#   BAZEL="bazel --output_base=DIR" tools/train.sh        a bazel of your own
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BAZEL=${BAZEL:-bazel}
$BAZEL build --noshow_progress //tools/cli:tessera
tessera="$($BAZEL info bazel-bin 2>/dev/null)/tools/cli/tessera"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np "${NP:-2}" \
  "$tessera" train --config "${CONFIG:-tools/configs/gpt-tiny.json}" "$@"
