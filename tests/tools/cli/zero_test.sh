#!/usr/bin/env bash
# ZeRO through `mpirun -np N tessera train --set zero.stage=1|2`: stages 1 and 2 give stage 0's
# losses (1e-5 relative, from the metrics files) on 2 data ranks with gradient accumulation, in
# f32, f16 (dynamic loss scaling) and bf16, and under tensor parallelism (tp 2 x dp 2); a stage-2
# checkpoint resumes under stage 0 and a stage-0 one under stage 2 with the uninterrupted run's
# next losses, and a tp 2 x dp 2 stage-2 checkpoint resumes on dp 2; what is not available yet
# (stage 3, offload, LAMB / LARS) is refused naming the key.
# Usage: zero_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
# 2 micro-batches of 2 per rank on 2 ranks: gradient accumulation under ZeRO too.
common=(--config "$cfg" --set train.steps=20 --set train.sample_tokens=0 --set logging.log_every=1
        --set train.micro_batch_size=2)

compare() {  # compare NAME A B TOL
  if python3 "$here/compare_losses.py" "$2" "$3" "$4" >"$LOG" 2>&1; then
    echo "ok: $1: $(cat "$LOG")"
  else
    fail "$1: $(cat "$LOG")"
  fi
}

# train NAME N PATTERN ARGS...: a run whose metrics go to $work/NAME.jsonl.
train() {
  local name=$1 n=$2 pattern=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" "$@"
  expect_ok "$name" "$pattern"
}

train s0 2 "micro-batch 2 per rank x 2 accumulation" --set checkpoint.dir="$work/ck-s0"
train s1 2 "zero: stage 1 over 2 data ranks" --set zero.stage=1
train s2 2 "zero: stage 2 over 2 data ranks" --set zero.stage=2 --set checkpoint.dir="$work/ck-s2"
compare "stage 0 vs stage 1" "$work/s0.jsonl" "$work/s1.jsonl" 1e-5
compare "stage 0 vs stage 2" "$work/s0.jsonl" "$work/s2.jsonl" 1e-5

for dtype in f16 bf16; do
  train "$dtype-s0" 2 "step 20/20" --set precision.dtype=$dtype
  train "$dtype-s2" 2 "zero: stage 2" --set precision.dtype=$dtype --set zero.stage=2
  compare "$dtype: stage 0 vs stage 2" "$work/$dtype-s0.jsonl" "$work/$dtype-s2.jsonl" 1e-5
done
train bf16-s1 2 "zero: stage 1" --set precision.dtype=bf16 --set zero.stage=1
compare "bf16: stage 0 vs stage 1" "$work/bf16-s0.jsonl" "$work/bf16-s1.jsonl" 1e-5

# ZeRO over the data group of a tp 2 x dp 2 layout.
train tp2dp2-s0 4 "tensor parallel: 1d over 2 ranks" --set parallel.tensor.size=2
train tp2dp2-s2 4 "zero: stage 2 over 2 data ranks" --set parallel.tensor.size=2 --set zero.stage=2 \
  --set checkpoint.dir="$work/ck-tp2dp2-s2"
compare "tp 2 x dp 2: stage 0 vs stage 2" "$work/tp2dp2-s0.jsonl" "$work/tp2dp2-s2.jsonl" 1e-5

# Every strategy landed, combined: tp 2 with sequence parallelism x dp 2 x ZeRO stage 2 x gradient
# accumulation gives the single-process serial run's losses (f32; no dropout in tiny_gpt).
train serial 1 "step 20/20"
train all 4 "sequence parallel" --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true --set zero.stage=2
compare "serial vs tp 2 + sequence parallel x dp 2 x ZeRO 2" "$work/serial.jsonl" "$work/all.jsonl" 1e-5

# Checkpoints hold the plain optimizer's state by parameter name: each resumes under the other.
resume() {  # resume NAME N CHECKPOINT_DIR ARGS...: steps 21-24 from the checkpoint at step 20
  local name=$1 n=$2 dir=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set train.steps=24 --set checkpoint.dir="$dir" \
    --set logging.metrics="$work/$name.jsonl" "$@"
  expect_ok "$name" "resumed from"
}
resume s0-from-s0 2 "$work/ck-s0"
cp -r "$work/ck-s2" "$work/ck-s2-copy"
resume s0-from-s2 2 "$work/ck-s2"
compare "next losses: stage-2 checkpoint under stage 0" "$work/s0-from-s0.jsonl" "$work/s0-from-s2.jsonl" 1e-5
rm -rf "$work/ck-s0/step-00000024"
resume s2-from-s0 2 "$work/ck-s0" --set zero.stage=2
compare "next losses: stage-0 checkpoint under stage 2" "$work/s0-from-s0.jsonl" "$work/s2-from-s0.jsonl" 1e-5
resume s1-from-s2 2 "$work/ck-s2-copy" --set zero.stage=1
compare "next losses: stage-2 checkpoint under stage 1" "$work/s0-from-s0.jsonl" "$work/s1-from-s2.jsonl" 1e-5
# The tp 2 x dp 2 stage-2 checkpoint holds the serial model and state by name: it resumes on dp 2
# under stage 0 as it resumes in its own layout (tensor parallelism changes the order of sums: 1e-4).
cp -r "$work/ck-tp2dp2-s2" "$work/ck-tp2dp2-s2-copy"
resume tp2dp2-s2-next 4 "$work/ck-tp2dp2-s2" --set parallel.tensor.size=2 --set zero.stage=2
resume dp2-s0-from-tp2dp2 2 "$work/ck-tp2dp2-s2-copy"
compare "next losses: tp 2 x dp 2 stage-2 checkpoint on dp 2 stage 0" "$work/tp2dp2-s2-next.jsonl" \
  "$work/dp2-s0-from-tp2dp2.jsonl" 1e-4

mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=3
expect_error "stage 3" "zero.stage 3: sharding the parameters themselves (ZeRO stage 3) is not available" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=1 --set zero.offload=true
expect_error "offload" "zero.offload: offloading the ZeRO optimizer to CPU memory is not available" 30
mpi 2 60 "$tessera" train --config "$cfg" --set zero.stage=2 --set optimizer.type=lamb
expect_error "lamb under ZeRO" "optimizer.type lamb with zero.stage 2" 30
n=$(grep -c "optimizer.type lamb with zero.stage 2" "$LOG")
[ "$n" -eq 1 ] && echo "ok: the error is printed once" || fail "the error is printed $n times"
finish
