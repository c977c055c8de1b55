#!/usr/bin/env bash
# ZeRO stages 1 and 2 against stage 0 on 2 and 4 ranks (zero_ranks.cc: equal results, optimizer
# state per rank, checkpoint state by name in both directions, refused optimizers).
# Usage: zero_test.sh ZERO_RANKS
set -u
source "$(dirname "$0")/../mpi_test_lib.sh"
for n in 2 4; do
  expect_pass "$n" 300 "zero: all checks passed on $n ranks" "$1"
  sed 's/^/    /' "$LOG"
done
finish
