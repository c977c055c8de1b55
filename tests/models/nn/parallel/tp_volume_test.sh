#!/usr/bin/env bash
# Communication volume and memory of 1D tensor parallelism on 2 and 4 ranks (tp 4 and tp 2 x dp 2
# on 4): the tensor group's counters against the predicted bytes, the allocator's parameter bytes
# against serial / P. Usage: tp_volume_test.sh TP_VOLUME_RANKS
set -u
source "$(dirname "$0")/../../../parallel/mpi_test_lib.sh"
ranks=$1
for n in 2 4; do
  expect_pass "$n" 240 "tp volume and memory:" "$ranks"
  grep -E "^tp (volume|memory):" "$LOG"
done
finish
