#!/usr/bin/env bash
# ZeRO stages 1, 2 and 3 against stage 0 on 2 and 4 ranks (zero_ranks.cc: equal results, optimizer
# state per rank, checkpoint state by name in both directions, offload bit-identical to no offload
# with the masters, gradients and Adam state counted as host bytes, refused optimizers), and stage 3's
# released parameters on bare ops (stage3_ranks.cc: the counters drop, gathers give the values,
# views saved for backward, the recorded order and prefetch, writes kept, the step lands).
# Usage: zero_test.sh ZERO_RANKS STAGE3_RANKS
set -u
source "$(dirname "$0")/../mpi_test_lib.sh"
for n in 2 4; do
  expect_pass "$n" 300 "zero: all checks passed on $n ranks" "$1"
  sed 's/^/    /' "$LOG"
  expect_pass "$n" 120 "zero stage 3: all checks passed on $n ranks" "$2"
  sed 's/^/    /' "$LOG"
done
finish
