#!/usr/bin/env bash
# `tessera bench` hands over to the bench binary built beside it: --help lists kernels, train and
# comm; `bench train` runs gpt-tiny; `mpirun -np 2 tessera bench comm` runs at tiny sizes with
# rank 0 printing both tables.
# Usage: bench_cli_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")

run 30 "$tessera" --help
expect_ok "tessera --help lists bench" "bench kernels|train|comm"

run 30 "$tessera" bench --help
expect_ok "bench --help" "usage: bench [kernels | train | comm | cuda]"
for sub in kernels train comm cuda; do
  grep -qE "^  $sub " "$LOG" && echo "ok: bench --help lists $sub" || fail "bench --help lacks $sub"
done

run 120 "$tessera" bench train --model gpt-tiny --shapes 2x16 --warmup 1 --steps 1 --no-peer
expect_ok "tessera bench train" "| gpt-tiny | 2 x 16 |"

mpi 2 240 "$tessera" bench comm --max-bytes 4K --model gpt-tiny --batch 1 --seq 16 --steps 1
expect_ok "mpirun -np 2 tessera bench comm" "## Data-parallel gpt-tiny training step"
[ "$(grep -c "^# tessera bench comm: 2 ranks" "$LOG")" -eq 1 ] && echo "ok: rank 0 alone prints" ||
  fail "expected one header line from rank 0"
[ "$(grep -cE "^\| (all_reduce|all_gather|reduce_scatter|broadcast|all_to_all) +\| +(1|4) KB" "$LOG")" -eq 10 ] &&
  echo "ok: 10 collective rows" || fail "expected 10 collective rows (5 collectives x 1 KB, 4 KB)"

run 30 "$tessera" bench frobnicate
expect_error "unknown bench subcommand" "expected the subcommand kernels, train, comm or cuda"

finish
