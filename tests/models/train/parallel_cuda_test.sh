#!/usr/bin/env bash
# Runs parallel_cuda_ranks (tensor parallelism and ZeRO on CUDA against the CPU) on 1, 2, 4 and 8
# ranks; each launch passes with one SKIPPED line where the machine has fewer GPUs than ranks.
# Usage: parallel_cuda_test.sh PARALLEL_CUDA_RANKS
set -u
source "$(dirname "$0")/../../parallel/mpi_test_lib.sh"
export TESSERA_COMM_TIMEOUT_S=60 TESSERA_NUM_THREADS=1
for n in 1 2 4 8; do
  expect_pass "$n" 300 "parallel_cuda: " "$1"
done
finish
