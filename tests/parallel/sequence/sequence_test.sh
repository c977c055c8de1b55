#!/usr/bin/env bash
# Runs each sequence-parallel rank program given on the command line on 2 and 4 ranks (the zigzag
# layout and the all_to_all heads need a group size dividing the test's sequence and heads). A rank
# left waiting in a ring transfer or an all-to-all ends the job after TESSERA_COMM_TIMEOUT_S
# seconds, and the test fails.
# Usage: sequence_test.sh PROGRAM...
set -u
source "$(dirname "$0")/../mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=20
# Ranks oversubscribe the cores: one compute thread each keeps the run to seconds.
export TESSERA_NUM_THREADS=${TESSERA_NUM_THREADS:-1}
for program in "$@"; do
  for n in 2 4; do
    expect_pass "$n" 90 "all checks passed on $n ranks" "$program"
  done
done
finish
