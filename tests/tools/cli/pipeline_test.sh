#!/usr/bin/env bash
# Pipeline parallelism through `mpirun -np N tessera train --set parallel.pipeline.size=P`: a
# 4-block tiny GPT under every schedule (gpipe, 1f1b, interleaved with 2 virtual stages,
# zero_bubble) on 2 and 4 stages, and pp 2 x dp 2 (interleaved), pp 2 x tp 2 (1d), pp 2 x tp 4
# (2d), pp 2 x tp 8 (3d), pp 2 x dp 2 x ZeRO 1, 2 and 3, with dropout on, gives the serial (with dp 2: the
# dp 2) run's losses (1e-5 relative, from the metrics files), its validation loss and its generated sample; pp 2 and pp 2 x tp 2d
# checkpoints resume serially (pp 2 also under pp 4), a serial one under pp 2 and pp 2 x tp 2d,
# with the uninterrupted run's next losses; impossible layouts are refused naming the numbers.
# Usage: pipeline_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
# 4 blocks; 4 micro-batches of 2 per step on one data rank.
# Dropout on: every layout draws the serial run's masks (nn::MicroBatchDropout).
common=(--config "$cfg" --set model.n_layers=4 --set train.steps=20 --set logging.log_every=1
        --set train.micro_batch_size=2 --set train.eval_every=5 --set train.sample_tokens=8
        --set model.dropout=0.1 --set model.attn_dropout=0.1)

# train NAME N PATTERN ARGS...: metrics in $work/NAME.jsonl, output kept in $work/NAME.log.
train() {
  local name=$1 n=$2 pattern=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" "$@"
  cp "$LOG" "$work/$name.log"
  expect_ok "$name" "$pattern"
}

# same_eval_and_sample NAME: NAME's validation losses and sample equal the serial run's.
same_eval_and_sample() {
  if python3 - "$work/serial.jsonl" "$work/$1.jsonl" <<'PY' >"$LOG" 2>&1; then
import json, sys
def evals(path):
    return [r["val_loss"] for r in map(json.loads, open(path)) if r.get("eval")]
a, b = evals(sys.argv[1]), evals(sys.argv[2])
assert a and len(a) == len(b), (a, b)
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst <= 1e-5, (a, b)
print(f"{len(a)} evaluations, worst relative difference {worst:.2e}")
PY
    echo "ok: $1: validation loss equals serial: $(cat "$LOG")"
  else
    fail "$1: validation loss: $(cat "$LOG")"
  fi
  local want got
  want=$(sed -n '/^sample/,$p' "$work/serial.log")
  got=$(sed -n '/^sample/,$p' "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: the sample equals serial"
  else fail "$1: sample differs: '$got' vs '$want'"; fi
}

train serial 1 "step 20/20" --set checkpoint.dir="$work/ck-serial"
pp=(--set parallel.pipeline.size=2)
for schedule in gpipe 1f1b zero_bubble; do
  train "pp2-$schedule" 2 "pipeline: $schedule over 2 stages" "${pp[@]}" \
    --set parallel.pipeline.schedule=$schedule
  compare "pp 2 $schedule vs serial" "$work/serial.jsonl" "$work/pp2-$schedule.jsonl" 1e-5
done
same_eval_and_sample pp2-1f1b
train pp2-interleaved 2 "pipeline: interleaved over 2 stages x 2 virtual" "${pp[@]}" \
  --set parallel.pipeline.schedule=interleaved --set parallel.pipeline.virtual_stages=2
compare "pp 2 interleaved (2 virtual stages) vs serial" "$work/serial.jsonl" \
  "$work/pp2-interleaved.jsonl" 1e-5
same_eval_and_sample pp2-interleaved

for schedule in 1f1b zero_bubble; do
  train "pp4-$schedule" 4 "pipeline: $schedule over 4 stages" \
    --set parallel.pipeline.size=4 --set parallel.pipeline.schedule=$schedule
  compare "pp 4 $schedule vs serial" "$work/serial.jsonl" "$work/pp4-$schedule.jsonl" 1e-5
done
# Checkpoints hold the serial model and the optimizer state by serial parameter: a pp 2 one
# resumes serially and under pp 4, a serial one under pp 2, each with the next losses of the
# serial run resumed from its own checkpoint (steps 21-24).
train pp2-ck 2 "pipeline: 1f1b over 2 stages" "${pp[@]}" --set checkpoint.dir="$work/ck-pp2"
resume() {  # resume NAME N CHECKPOINT_DIR ARGS...
  local name=$1 n=$2 dir=$3
  shift 3
  rm -rf "$dir/step-00000024"
  mpi "$n" 300 "$tessera" train "${common[@]}" --set train.steps=24 --set checkpoint.dir="$dir" \
    --set logging.metrics="$work/$name.jsonl" "$@"
  expect_ok "$name" "resumed from"
}
resume serial-next 1 "$work/ck-serial"
resume serial-from-pp2 1 "$work/ck-pp2"
compare "next losses: pp 2 checkpoint resumed serially" "$work/serial-next.jsonl" \
  "$work/serial-from-pp2.jsonl" 1e-5
resume pp4-from-pp2 4 "$work/ck-pp2" --set parallel.pipeline.size=4
compare "next losses: pp 2 checkpoint under pp 4" "$work/serial-next.jsonl" \
  "$work/pp4-from-pp2.jsonl" 1e-5
resume pp2-from-serial 2 "$work/ck-serial" "${pp[@]}" --set parallel.pipeline.schedule=zero_bubble
compare "next losses: serial checkpoint under pp 2" "$work/serial-next.jsonl" \
  "$work/pp2-from-serial.jsonl" 1e-5
# The pp 2 checkpoint is a serial model: one process generates from it what the serial one does.
for ck in serial pp2; do
  run 60 "$tessera" generate --checkpoint "$work/ck-$ck/step-00000020" --max-new-tokens 16 \
    --temperature 0
  expect_ok "generate from the $ck checkpoint" ""
  cp "$LOG" "$work/generate-$ck.txt"
done
if cmp -s "$work/generate-serial.txt" "$work/generate-pp2.txt"; then
  echo "ok: the pp 2 checkpoint generates the serial checkpoint's text on one process"
else
  fail "generation differs: $(cat "$work/generate-pp2.txt") vs $(cat "$work/generate-serial.txt")"
fi

train pp2-explicit 2 "blocks [0,1) [1,4)" "${pp[@]}" --set "parallel.pipeline.partition=[1,3]"
compare "pp 2 partition [1, 3] vs serial" "$work/serial.jsonl" "$work/pp2-explicit.jsonl" 1e-5

# With the other strategies.
# The data-parallel reduction of each model chunk starts within that chunk's final backward
# (interleaved: chunk by chunk; zero bubble: within the last W). Data-parallel ranks draw their own
# dropout masks, so these are compared with dp 2.
train dp2 2 "ranks: 2 (data parallel 2)" --set parallel.data=2 --set checkpoint.dir="$work/ck-dp2"
train pp2dp2 4 "ranks: 4 (data parallel 2)" "${pp[@]}" --set parallel.pipeline.schedule=interleaved \
  --set parallel.pipeline.virtual_stages=2
compare "pp 2 interleaved (2 virtual stages) x dp 2 vs dp 2" "$work/dp2.jsonl" \
  "$work/pp2dp2.jsonl" 1e-5
train pp2dp2-zb 4 "ranks: 4 (data parallel 2)" "${pp[@]}" --set parallel.pipeline.schedule=zero_bubble
compare "pp 2 zero_bubble x dp 2 vs dp 2" "$work/dp2.jsonl" "$work/pp2dp2-zb.jsonl" 1e-5
train pp2tp2 4 "tensor parallel: 1d over 2 ranks" "${pp[@]}" --set parallel.tensor.size=2
compare "pp 2 x tp 2 vs serial" "$work/serial.jsonl" "$work/pp2tp2.jsonl" 1e-5
same_eval_and_sample pp2tp2
train pp2sp 4 "sequence parallel" "${pp[@]}" --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true --set model.checkpoint=true
compare "pp 2 x tp 2 with sequence parallelism and activation checkpointing vs serial" \
  "$work/serial.jsonl" "$work/pp2sp.jsonl" 1e-5
same_eval_and_sample pp2sp
# 2D (SUMMA on a 2 x 2 grid) and 3D (a 2 x 2 x 2 cube, which needs the heads divisible by 4)
# tensor parallelism inside every stage.
train pp2tp2d 8 "tensor parallel: 2d over 4 ranks" "${pp[@]}" --set parallel.tensor.size=4 \
  --set parallel.tensor.mode=2d --set checkpoint.dir="$work/ck-pp2tp2d"
compare "pp 2 x tp 2d vs serial" "$work/serial.jsonl" "$work/pp2tp2d.jsonl" 1e-5
same_eval_and_sample pp2tp2d
resume serial-from-pp2tp2d 1 "$work/ck-pp2tp2d"
compare "next losses: pp 2 x tp 2d checkpoint resumed serially" "$work/serial-next.jsonl" \
  "$work/serial-from-pp2tp2d.jsonl" 1e-5
resume pp2tp2d-from-serial 8 "$work/ck-serial" "${pp[@]}" --set parallel.tensor.size=4 \
  --set parallel.tensor.mode=2d
compare "next losses: serial checkpoint under pp 2 x tp 2d" "$work/serial-next.jsonl" \
  "$work/pp2tp2d-from-serial.jsonl" 1e-5
train serial-h4 1 "step 20/20" --set model.n_heads=4
train pp2tp3d 16 "tensor parallel: 3d over 8 ranks" "${pp[@]}" --set parallel.tensor.size=8 \
  --set parallel.tensor.mode=3d --set model.n_heads=4
compare "pp 2 x tp 3d vs serial" "$work/serial-h4.jsonl" "$work/pp2tp3d.jsonl" 1e-5
train pp2dp2z1 4 "zero: stage 1 over 2 data ranks" "${pp[@]}" --set zero.stage=1 \
  --set parallel.pipeline.schedule=zero_bubble
compare "pp 2 zero_bubble x dp 2 x ZeRO 1 vs dp 2" "$work/dp2.jsonl" "$work/pp2dp2z1.jsonl" 1e-5
# ZeRO 2 and 3 reduce-scatter each stage's accumulated gradients after the schedule (stage 3 also
# gathers each stage's parameters on use); their checkpoints are the serial model's.
train pp2dp2z2 4 "zero: stage 2 over 2 data ranks" "${pp[@]}" --set zero.stage=2
compare "pp 2 x dp 2 x ZeRO 2 vs dp 2" "$work/dp2.jsonl" "$work/pp2dp2z2.jsonl" 1e-5
train pp2dp2z3 4 "zero: stage 3 over 2 data ranks" "${pp[@]}" --set zero.stage=3 \
  --set parallel.pipeline.schedule=interleaved --set parallel.pipeline.virtual_stages=2 \
  --set checkpoint.dir="$work/ck-pp2dp2z3"
compare "pp 2 interleaved x dp 2 x ZeRO 3 vs dp 2" "$work/dp2.jsonl" "$work/pp2dp2z3.jsonl" 1e-5
resume dp2-next 2 "$work/ck-dp2" --set parallel.data=2
resume dp2-from-pp2dp2z3 2 "$work/ck-pp2dp2z3" --set parallel.data=2
compare "next losses: pp 2 x dp 2 x ZeRO 3 checkpoint under dp 2" "$work/dp2-next.jsonl" \
  "$work/dp2-from-pp2dp2z3.jsonl" 1e-5

# Impossible layouts.
mpi 2 60 "$tessera" train "${common[@]}" --set model.n_layers=1 "${pp[@]}"
expect_error "more stages than blocks" "2 stages for 1 blocks" 30
mpi 2 60 "$tessera" train "${common[@]}" "${pp[@]}" --set parallel.pipeline.schedule=interleaved \
  --set parallel.pipeline.virtual_stages=2 --set train.batch_size=6
expect_error "interleaved micro-batches" "micro-batches per step" 30
mpi 2 60 "$tessera" train "${common[@]}" "${pp[@]}" --set "parallel.pipeline.partition=[1,2]"
expect_error "explicit partition of the wrong sum" "partition" 30
mpi 2 60 "$tessera" train "${common[@]}" "${pp[@]}" --set parallel.pipeline.schedule=zigzag
expect_error "unknown schedule" "parallel.pipeline.schedule" 30
finish
