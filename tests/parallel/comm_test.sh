#!/usr/bin/env bash
# Runs the collective / communicator checks and the parallel-context checks on 1, 2, 4 and 8 ranks,
# and the collective checks again with the blocking path for small collectives off, so the
# nonblocking forms (and recursive doubling) run on the small tensors too.
# Usage: comm_test.sh COMM_RANKS CONTEXT_RANKS
set -u
source "$(dirname "$0")/mpi_test_lib.sh"
comm_ranks=$1
context_ranks=$2
for n in 1 2 4 8; do
  expect_pass "$n" 120 "comm: all checks passed on $n ranks" "$comm_ranks"
  expect_pass "$n" 120 "context: " "$context_ranks"
done
for n in 2 4; do
  TESSERA_MPI_BLOCKING=0 expect_pass "$n" 120 "comm: all checks passed on $n ranks" "$comm_ranks"
done
finish
