#!/usr/bin/env bash
# 2D (SUMMA) tensor parallelism against the serial layers on a 2 x 2 grid (4 ranks) and a 3 x 3
# grid (9 ranks), every case inside one launch each. A rank left waiting in a collective (a SUMMA
# node that did not run on a peer) ends the job after TESSERA_COMM_TIMEOUT_S seconds.
# Usage: tp_2d_test.sh TP_2D_RANKS
set -u
source "$(dirname "$0")/../../../parallel/mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=60
ranks=$1
for n in 4 9; do
  expect_pass "$n" 240 "tp 2d: all checks passed" "$ranks"
  grep -E "^tp 2d volume:" "$LOG"
done
finish
