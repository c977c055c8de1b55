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
expect_fault 2 30 "waited 2 s for the gradient of micro-batch 0 from pipeline rank 1" "$program" hang
finish
