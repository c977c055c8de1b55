#!/usr/bin/env bash
# Runs each tensor-parallel rank program given on the command line on 2, 3 and 4 ranks. A rank
# left waiting in a collective (a backward node that did not run on a peer) ends the job after
# TESSERA_COMM_TIMEOUT_S seconds, and the test fails.
# Usage: tensor_test.sh PROGRAM...
set -u
source "$(dirname "$0")/../mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=20
for program in "$@"; do
  for n in 2 3 4; do
    expect_pass "$n" 90 "all checks passed on $n ranks" "$program"
  done
done
finish
