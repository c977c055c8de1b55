#!/usr/bin/env bash
# Pipeline parallelism for BERT and ViT through `mpirun -np N tessera train`: a 4-block tiny BERT
# (masked LM; its decoder is tied to the word embeddings, held by the first and the last stage) and
# a 4-block tiny ViT under 1f1b, zero_bubble and interleaved (2 virtual stages) on 2 stages, 1f1b
# on 4, pp 2 x dp 2, pp 2 x tp 2 (vocab-parallel word embeddings and decoder) and pp 2 x tp 2d
# (SUMMA on a 2 x 2 grid in every stage), with dropout on, give the serial run's losses (1e-5
# relative, from the metrics files) and its validation metrics (pp 2 x dp 2: the dp 2 run's, as
# each data rank draws its own masks and evaluates its own rows); a pp 4 checkpoint resumes on one process
# with the serial checkpoint's next losses.
# Usage: pipeline_models_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
configs=$here/../../../tools/configs
work=$TMPDIR/work
mkdir -p "$work"

# same_eval NAME A B: B's validation metrics (every key of the eval records) equal A's, 1e-5
# relative (the weights differ from serial by float rounding only).
same_eval() {
  if python3 - "$2" "$3" <<'PY' >"$LOG" 2>&1; then
import json, sys
def evals(path):
    return [r for r in map(json.loads, open(path)) if r.get("eval")]
a, b = evals(sys.argv[1]), evals(sys.argv[2])
assert a and len(a) == len(b), (a, b)
worst = 0.0
for x, y in zip(a, b):
    assert x.keys() == y.keys(), (x, y)
    for k in x:
        d = abs(x[k] - y[k]) / max(abs(x[k]), 1e-12)
        assert d <= 1e-5, (k, x, y)
        worst = max(worst, d)
keys = sorted(k for k in a[-1] if k not in ("eval", "step"))
print(f"{len(a)} evaluations of {', '.join(keys)} (last: " +
      ", ".join(f"{k} {a[-1][k]:.4f}" for k in keys) + f"), worst relative difference {worst:.2e}")
PY
    echo "ok: $1: $(cat "$LOG")"
  else
    fail "$1: validation metrics: $(cat "$LOG")"
  fi
}

for model in bert vit; do
  # 4 blocks of width 32; 4 micro-batches of 2 per step on one data rank; a large learning rate, so
  # that the accuracies compared are not all zero after 20 steps.
  common=(--config "$configs/$model-tiny.json" --set model.n_layers=4 --set model.d_model=32
          --set model.n_heads=2 --set model.mlp_hidden=64 --set train.steps=20
          --set train.batch_size=8 --set train.micro_batch_size=2 --set train.eval_every=5
          --set train.eval_batches=8 --set schedule.warmup_steps=2 --set optimizer.lr=1e-2
          --set logging.log_every=1 --set model.dropout=0.1 --set model.attn_dropout=0.1)
  if [ "$model" = bert ]; then common+=(--set model.max_positions=32)
  # ViT at 1e-2 is unstable over 20 steps (its loss rises): rounding differences between layouts
  # then grow to 1e-2. At 3e-3 it learns steadily and the layouts agree to 1e-7.
  else common+=(--set model.image_size=16 --set optimizer.lr=3e-3); fi

  # train NAME N PATTERN ARGS...: metrics in $work/$model-NAME.jsonl, its checkpoint in
  # $work/$model-NAME.
  train() {
    local name=$model-$1 n=$2 pattern=$3
    shift 3
    mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" \
      --set checkpoint.dir="$work/$name" "$@"
    expect_ok "$name" "$pattern"
  }
  serial=$work/$model-serial.jsonl
  train serial 1 "step 20/20"
  pp=(--set parallel.pipeline.size=2)
  for schedule in 1f1b zero_bubble; do
    train "pp2-$schedule" 2 "pipeline: $schedule over 2 stages" "${pp[@]}" \
      --set parallel.pipeline.schedule=$schedule
    compare "$model pp 2 $schedule vs serial" "$serial" "$work/$model-pp2-$schedule.jsonl" 1e-5
    same_eval "$model pp 2 $schedule: validation equals serial" "$serial" \
      "$work/$model-pp2-$schedule.jsonl"
  done
  train pp2-interleaved 2 "pipeline: interleaved over 2 stages x 2 virtual" "${pp[@]}" \
    --set parallel.pipeline.schedule=interleaved --set parallel.pipeline.virtual_stages=2
  compare "$model pp 2 interleaved (2 virtual stages) vs serial" "$serial" \
    "$work/$model-pp2-interleaved.jsonl" 1e-5
  same_eval "$model pp 2 interleaved: validation equals serial" "$serial" \
    "$work/$model-pp2-interleaved.jsonl"
  train pp4 4 "pipeline: 1f1b over 4 stages" --set parallel.pipeline.size=4
  compare "$model pp 4 1f1b vs serial" "$serial" "$work/$model-pp4.jsonl" 1e-5
  same_eval "$model pp 4: validation equals serial" "$serial" "$work/$model-pp4.jsonl"

  train dp2 2 "ranks: 2 (data parallel 2)"
  train pp2dp2 4 "ranks: 4 (data parallel 2)" "${pp[@]}"
  # Data-parallel ranks draw their own dropout masks: compared with dp 2.
  compare "$model pp 2 x dp 2 vs dp 2" "$work/$model-dp2.jsonl" "$work/$model-pp2dp2.jsonl" 1e-5
  same_eval "$model pp 2 x dp 2: validation equals dp 2" "$work/$model-dp2.jsonl" \
    "$work/$model-pp2dp2.jsonl"

  train pp2tp2 4 "tensor parallel: 1d over 2 ranks" "${pp[@]}" --set parallel.tensor.size=2
  compare "$model pp 2 x tp 2 vs serial" "$serial" "$work/$model-pp2tp2.jsonl" 1e-5
  same_eval "$model pp 2 x tp 2: validation equals serial" "$serial" "$work/$model-pp2tp2.jsonl"
  train pp2tp2d 8 "tensor parallel: 2d over 4 ranks" "${pp[@]}" --set parallel.tensor.size=4 \
    --set parallel.tensor.mode=2d
  compare "$model pp 2 x tp 2d vs serial" "$serial" "$work/$model-pp2tp2d.jsonl" 1e-5
  same_eval "$model pp 2 x tp 2d: validation equals serial" "$serial" "$work/$model-pp2tp2d.jsonl"

  # The pp 4 checkpoint is the serial model (the tied weight once, the optimizer state by serial
  # parameter): resumed on one process it continues as the serial checkpoint does (steps 21-22).
  for from in serial pp4; do
    mpi 1 300 "$tessera" train "${common[@]}" --set train.steps=22 \
      --set checkpoint.dir="$work/$model-$from" --set logging.metrics="$work/$model-next-$from.jsonl"
    expect_ok "$model resumed from the $from checkpoint" "resumed from"
  done
  compare "$model next losses: pp 4 checkpoint resumed serially" "$work/$model-next-serial.jsonl" \
    "$work/$model-next-pp4.jsonl" 1e-5
done
finish
