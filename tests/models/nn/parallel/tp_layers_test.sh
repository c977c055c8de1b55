#!/usr/bin/env bash
# The 1D tensor-parallel layers and GPT against their serial twins on 2 and 4 ranks (one launch
# each, every case inside, with and without sequence parallelism), and the activation bytes per
# rank with and without it. Usage: tp_layers_test.sh TP_GPT_RANKS
set -u
source "$(dirname "$0")/../../../parallel/mpi_test_lib.sh"
ranks=$1
for n in 2 4; do
  expect_pass "$n" 240 "tp layers:" "$ranks"
  grep -F "activation bytes per rank" "$LOG" || fail "tp_gpt_ranks on $n ranks: no activation report"
done
finish
