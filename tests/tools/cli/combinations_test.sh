#!/usr/bin/env bash
# Every strategy with every other: `tessera train` under each pair and triple of data, pipeline
# (1f1b, interleaved, zero bubble), sequence (ring, all_to_all, ring_flash), tensor (1d, also with
# Megatron's sequence parallelism and activation checkpointing, 2d, 2.5d, 3d) parallelism and
# ZeRO 1-3,
# on 4, 8 and 16 ranks, gives the serial run's losses and gradient norms over 10 steps (1e-5
# relative, from the metrics files): the tiny GPT in every combination, BERT and ViT in a
# representative set. Dropout is off, so data-parallel layouts equal the serial run too (with
# dropout on each data rank draws its own masks; the strategy tests check dropout layout by
# layout). A layout that hangs fails by its time limit.
# Usage: combinations_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
configs=$here/../../../tools/configs
work=$TMPDIR/work
mkdir -p "$work"

# layout TOKEN...: the --set arguments of a layout, and RANKS, the world size it needs.
layout() {
  ARGS=()
  RANKS=1
  local t
  for t in "$@"; do
    case $t in
      dp) ARGS+=(--set parallel.data=2); RANKS=$((RANKS * 2)) ;;
      pp) ARGS+=(--set parallel.pipeline.size=2); RANKS=$((RANKS * 2)) ;;
      ppi) ARGS+=(--set parallel.pipeline.size=2 --set parallel.pipeline.schedule=interleaved
                  --set parallel.pipeline.virtual_stages=2); RANKS=$((RANKS * 2)) ;;
      ppz) ARGS+=(--set parallel.pipeline.size=2 --set parallel.pipeline.schedule=zero_bubble)
           RANKS=$((RANKS * 2)) ;;
      sp) ARGS+=(--set parallel.sequence.size=2); RANKS=$((RANKS * 2)) ;;
      spr) ARGS+=(--set parallel.sequence.size=2 --set parallel.sequence.mode=ring)
           RANKS=$((RANKS * 2)) ;;
      spa) ARGS+=(--set parallel.sequence.size=2 --set parallel.sequence.mode=all_to_all)
           RANKS=$((RANKS * 2)) ;;
      tp) ARGS+=(--set parallel.tensor.size=2); RANKS=$((RANKS * 2)) ;;
      tpsp) ARGS+=(--set parallel.tensor.size=2 --set parallel.tensor.sequence_parallel=true
                   --set model.checkpoint=true); RANKS=$((RANKS * 2)) ;;
      tp2d) ARGS+=(--set parallel.tensor.size=4 --set parallel.tensor.mode=2d); RANKS=$((RANKS * 4)) ;;
      tp25d) ARGS+=(--set parallel.tensor.size=8 --set parallel.tensor.mode=2.5d
                    --set parallel.tensor.depth=2 --set train.micro_batch_size=4)
             RANKS=$((RANKS * 8)) ;;  # the micro-batch cut over depth x q = 4
      tp3d) ARGS+=(--set parallel.tensor.size=8 --set parallel.tensor.mode=3d); RANKS=$((RANKS * 8)) ;;
      z1 | z2 | z3) ARGS+=(--set zero.stage=${t#z}) ;;
      *) echo "unknown layout token $t"; exit 2 ;;
    esac
  done
}

# check MODEL CASE...: each CASE (tokens joined by spaces) trained and compared with serial.
check() {
  local model=$1 c
  shift
  mpi 1 120 "$tessera" train "${common[@]}" --set logging.metrics="$work/$model-serial.jsonl"
  expect_ok "$model serial" "step 10/10"
  for c in "$@"; do
    local name
    name="$model $(echo "$c" | sed 's/ / x /g')"
    # shellcheck disable=SC2086  # the case's tokens, one word each
    layout $c
    local metrics="$work/$model-${c// /-}.jsonl"
    mpi "$RANKS" 180 "$tessera" train "${common[@]}" "${ARGS[@]}" --set logging.metrics="$metrics"
    expect_ok "$name ($RANKS ranks)" "step 10/10"
    compare "$name vs serial" "$work/$model-serial.jsonl" "$metrics" 1e-5 --grad-norms
  done
}

# GPT: 4 blocks (two stages, or two chunks each of two stages), 4 heads (tensor 2 x sequence 2
# under all_to_all; 3D's q^2), batch 8 in micro-batches of 2 (2D and 3D cut them by q = 2).
common=(--config "$here/tiny_gpt.json" --set model.n_layers=4 --set model.n_heads=4
        --set train.steps=10 --set train.batch_size=8 --set train.micro_batch_size=2
        --set train.eval_every=0 --set train.sample_tokens=0 --set logging.log_every=1
        --set checkpoint.dir=)
check gpt \
  "dp pp" "dp sp" "dp tp" "pp sp" "pp tp" "sp tp" "dp z1" "dp z2" "dp z3" "pp tpsp" "dp tpsp" \
  "dp tp2d" "pp tp2d" "dp pp sp" "dp pp tp" "dp sp tp" "pp sp tp" "pp spa tp" "dp spr tp z1" \
  "dp pp z1" "dp pp z2" "dp ppi z3" "dp ppz z1" "dp sp z3" "dp tp z2" "dp tp z3" "dp ppi tp" \
  "pp tp3d" "pp tp25d" "dp tp2d z2" "dp tp3d z1" "sp tp2d" "sp tp3d" "pp sp tp2d"
  "dp pp sp tp z1"

for model in bert vit; do
  common=(--config "$configs/$model-tiny.json" --set model.n_layers=4 --set model.d_model=32
          --set model.n_heads=4 --set model.mlp_hidden=64 --set train.steps=10
          --set train.batch_size=8 --set train.micro_batch_size=2 --set train.eval_every=0
          --set schedule.warmup_steps=2 --set optimizer.lr=3e-3 --set logging.log_every=1
          --set checkpoint.dir=)
  # BERT's vocabulary divides by q^3 = 8 for 3D (its decoder bias is cut in q^3 pieces).
  if [ "$model" = bert ]; then common+=(--set model.max_positions=32 --set model.vocab_size=264)
  else common+=(--set model.image_size=16); fi  # 16 patches + the class token: padded under sp
  check $model "dp pp" "pp tp" "pp sp" "dp sp tp" "pp tp2d" "dp ppi z3" "dp tp z2" "pp tp3d" \
    "sp tp2d"
done
finish
