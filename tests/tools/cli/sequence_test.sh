#!/usr/bin/env bash
# The paper's sequence parallelism through `mpirun -np N tessera train --set
# parallel.sequence.size=S`: the tiny GPT with dropout on, each attention mode (ring, all_to_all,
# ring_flash) on 2 and 4 sequence ranks and sp 2 x ZeRO 2 give the serial run's
# losses (1e-5 relative), validation loss and generated sample; a sequence-parallel checkpoint
# resumes serially; layouts that cannot split are refused naming the numbers.
# Usage: sequence_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=8 --set logging.log_every=1 --set train.micro_batch_size=4
        --set train.eval_every=4 --set train.sample_tokens=8 --set model.dropout=0.1
        --set model.attn_dropout=0.1 --set model.n_heads=4)

compare() {  # compare NAME A B TOL
  if python3 "$here/compare_losses.py" "$2" "$3" "$4" >"$LOG" 2>&1; then
    echo "ok: $1: $(cat "$LOG")"
  else
    fail "$1: $(cat "$LOG")"
  fi
}

train() {  # train NAME N PATTERN ARGS...
  local name=$1 n=$2 pattern=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" "$@"
  cp "$LOG" "$work/$name.log"
  expect_ok "$name" "$pattern"
}

same_eval_and_sample() {  # NAME against serial
  local want got
  want=$(grep -o "val loss [0-9.]*" "$work/serial.log")
  got=$(grep -o "val loss [0-9.]*" "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: validation equals serial ($got)"
  else fail "$1: validation '$got' vs '$want'"; fi
  want=$(sed -n '/^sample/,$p' "$work/serial.log")
  got=$(sed -n '/^sample/,$p' "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: the sample equals serial"
  else fail "$1: sample differs: '$got' vs '$want'"; fi
}

train serial 1 "step 8/8" --set checkpoint.dir="$work/ck-serial"
for mode in ring all_to_all ring_flash; do
  for s in 2 4; do
    train "sp$s-$mode" "$s" "sequence parallel: $mode attention over $s ranks" \
      --set parallel.sequence.size=$s --set parallel.sequence.mode=$mode
    compare "sp $s $mode vs serial" "$work/serial.jsonl" "$work/sp$s-$mode.jsonl" 1e-5
  done
done
same_eval_and_sample sp4-ring_flash
same_eval_and_sample sp2-ring
# Data-parallel ranks draw their own dropout masks, so sp 2 x dp 2 is compared with dp 2.
train dp2 2 "data parallel 2" --set parallel.data=2
train sp2dp2 4 "data parallel 2" --set parallel.sequence=2
compare "sp 2 x dp 2 vs dp 2" "$work/dp2.jsonl" "$work/sp2dp2.jsonl" 1e-5
train sp2z2 2 "zero: stage 2" --set parallel.sequence=2 --set zero.stage=2 \
  --set checkpoint.dir="$work/ck-sp2"
compare "sp 2 x ZeRO 2 vs serial" "$work/serial.jsonl" "$work/sp2z2.jsonl" 1e-5

# The checkpoint holds the serial model: it resumes on one process with the serial run's next losses.
for from in serial sp2; do
  mpi 1 120 "$tessera" train "${common[@]}" --set train.steps=10 --set checkpoint.dir="$work/ck-$from" \
    --set logging.metrics="$work/next-$from.jsonl"
  expect_ok "resume the $from checkpoint serially" "resumed from"
done
compare "next losses: sp 2 checkpoint resumed serially" "$work/next-serial.jsonl" \
  "$work/next-sp2.jsonl" 1e-5

mpi 2 60 "$tessera" train "${common[@]}" --set parallel.sequence=2 --set train.seq_len=31
expect_error "odd sequence length" "sequence length (train.seq_len or model.context_length) 31 divisible by 2" 30
mpi 2 60 "$tessera" train "${common[@]}" --set parallel.sequence.size=2 \
  --set parallel.sequence.mode=all_to_all --set model.n_heads=1 --set model.d_model=32
expect_error "heads for all_to_all" "model.n_heads 1 divisible by 2" 30
finish
