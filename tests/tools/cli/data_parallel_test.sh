#!/usr/bin/env bash
# `mpirun -np N tessera train`: 2 data-parallel ranks give the losses of 1 rank with the same
# global batch (with and without gradient accumulation), rank 0 alone prints progress, and a
# mistake every rank makes is reported once, with every rank exiting non-zero and nothing hanging.
# Usage: data_parallel_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=8 --set train.sample_tokens=0 --set logging.log_every=1)

mpi 1 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/one.jsonl"
expect_ok "1 rank, micro-batch 8" "step 8/8"
mpi 1 300 "$tessera" train "${common[@]}" --set train.micro_batch_size=4 --set logging.metrics="$work/accum.jsonl"
expect_ok "1 rank, 2 micro-batches of 4" "micro-batch 4 per rank x 2 accumulation"
mpi 2 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/two.jsonl"
expect_ok "2 ranks, micro-batch 4 each" "ranks: 2 (data parallel 2)"
[ "$(grep -c 'step 8/8' "$LOG")" -eq 1 ] && echo "ok: only rank 0 prints progress" || fail "progress printed $(grep -c 'step 8/8' "$LOG") times"

for other in accum two; do
  if python3 "$here/compare_losses.py" "$work/one.jsonl" "$work/$other.jsonl" 1e-5 >"$LOG" 2>&1; then
    echo "ok: 1 rank vs $other: $(cat "$LOG")"
  else
    fail "1 rank vs $other: losses differ"
  fi
done

mpi 2 60 "$tessera" train --config "$cfg" --set train.stpes=3
expect_error "unknown key on 2 ranks" "unknown key 'train.stpes'" 30
n=$(grep -c "unknown key 'train.stpes'" "$LOG")
[ "$n" -eq 1 ] && echo "ok: the error is printed once" || fail "the error is printed $n times"

# train.device cuda: every rank finds no GPU and one error is printed; with 2 GPUs or more, 2 ranks
# reduce their gradients over NCCL and follow the CPU's single-rank losses.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -eq 0 ]; then
  mpi 2 60 "$tessera" train --config "$cfg" --set train.device=cuda
  expect_error "train.device cuda on 2 ranks without a GPU" "[config] train.device cuda: no " 30
  n=$(grep -c "train.device cuda: no " "$LOG")
  [ "$n" -eq 1 ] && echo "ok: the no-GPU error is printed once" || fail "the no-GPU error is printed $n times"
elif [ "$gpus" -ge 2 ]; then
  mpi 2 300 "$tessera" train "${common[@]}" --set train.device=cuda --set logging.metrics="$work/gpu2.jsonl"
  expect_ok "2 ranks on 2 GPUs (NCCL)" "ranks: 2 (data parallel 2)"
  if python3 "$here/compare_losses.py" "$work/one.jsonl" "$work/gpu2.jsonl" 1e-3 >"$LOG" 2>&1; then
    echo "ok: 1 CPU rank vs 2 GPU ranks: $(cat "$LOG")"
  else
    fail "1 CPU rank vs 2 GPU ranks: losses differ"
  fi
else
  echo "skipped: data parallelism on CUDA needs 2 GPUs, found $gpus"
fi

mpi 2 60 "$tessera" train --config "$cfg" --set parallel.data=3
expect_error "impossible layout" "= 3 ranks, but the job has 2" 30

finish
