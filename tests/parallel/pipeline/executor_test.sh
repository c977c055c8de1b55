#!/usr/bin/env bash
# The pipeline executor under mpirun on 2, 3 and 4 ranks: every schedule's gradients equal the
# serial chain's; a stage that throws and a receive that never completes end the job with a
# message naming the stage and micro-batch / both ranks, within seconds.
# Usage: executor_test.sh EXECUTOR_RANKS
set -u
source "$(dirname "$0")/../mpi_test_lib.sh"
program=$1
for n in 2 3 4; do
  expect_pass "$n" 120 "all checks passed on $n ranks" "$program"
done
expect_fault 2 30 "stage 1 (pipeline rank 1) failed at micro-batch 2" "$program" throw
# The receive waits as long as any collective (the communicator's timeout), then names the stage.
TESSERA_COMM_TIMEOUT_S=2 expect_fault 2 30 \
  "waited 2 s for the gradient of micro-batch 0 from pipeline rank 1" "$program" hang
# A stage on a GPU receives into device memory (this host has none, so the receive fails there).
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect_fault 2 30 "stage 1 (pipeline rank 1) failed at micro-batch 0" "$program" device
fi
finish
