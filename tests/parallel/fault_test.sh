#!/usr/bin/env bash
# Breaks one rank in several ways and checks that the whole job ends non-zero, within seconds,
# with a message naming the rank and the cause. Usage: fault_test.sh FAULT_RANKS
set -u
source "$(dirname "$0")/mpi_test_lib.sh"
prog=$1
export TESSERA_COMM_TIMEOUT_S=60
expect_fault 4 30 "rank 3: [fault_test] deliberate failure" "$prog" throw
expect_fault 2 30 "[check_same_config] expected every rank of group world to hold the same configuration, got a different one on rank 1" "$prog" config
expect_fault 2 30 "exited with non-zero status" "$prog" exit_abrupt
# A failure inside agreed work: every rank throws it, so a caller that catches it goes on on every
# rank; uncaught, the job ends with the message printed once, by the rank it belongs to.
expect_pass 4 30 "every rank caught the failure" "$prog" agreed_caught
expect_fault 4 30 "rank 3: [fault_test] deliberate failure" "$prog" agreed
if [ "$(grep -cF "[fault_test] deliberate failure" "$LOG")" -ne 1 ]; then
  fail "agreed: expected the failure printed once"
fi
export TESSERA_COMM_TIMEOUT_S=2
expect_fault 2 30 "rank 0: [all_reduce] timed out after 2 s in group world" "$prog" hang
expect_fault 2 30 "rank 0: [recv] timed out after 2 s in group world" "$prog" recv_timeout
expect_fault 3 30 "timed out after 2 s in group world" "$prog" exit_early
finish
