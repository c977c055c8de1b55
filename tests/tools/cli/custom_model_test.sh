#!/usr/bin/env bash
# A model that is none of the bundled three (tools/examples/parallel_block_lm: parallel attention
# + MLP blocks, an untied head), written once as serial code and trained through the engine API
# (models/train/engine.h), equals its serial run under each layout below: losses and gradient
# norms over 6 steps of 2-row micro-batches within 1e-5 relative. Dropout is off where data-parallel
# ranks draw their own masks, and on (0.1) under tensor x pipeline and the paper's sequence
# parallelism (with tensor, with pipeline and all_to_all, zigzag on 4 ranks), where the keyed masks
# must match the serial ones. Also: Megatron's sequence parallelism and a custom model in
# `tessera train` are refused with the reason.
# Usage: custom_model_test.sh PARALLEL_BLOCK_LM TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
example=$(realpath "$1")
tessera=$(realpath "$2")
work=$TMPDIR/work
mkdir -p "$work"
steps=(--set train.steps=6 --set train.batch_size=8 --set train.micro_batch_size=2
       --set schedule.warmup_steps=2 --set train.eval_every=0 --set train.eval_batches=1)

# case NAME RANKS DROPOUT SET...: trains under the layout and compares with the serial run.
case_() {
  local name=$1 ranks=$2 dropout=$3
  shift 3
  local serial=$work/serial-$dropout.jsonl
  if [ ! -f "$serial" ]; then
    run 60 "$example" "${steps[@]}" --set model.dropout="$dropout" --set logging.metrics="$serial"
    expect_ok "serial run (dropout $dropout)" "done: 6 steps"
  fi
  mpi "$ranks" 120 "$example" "${steps[@]}" --set model.dropout="$dropout" "$@" \
    --set logging.metrics="$work/$name.jsonl"
  expect_ok "$name on $ranks ranks" "done: 6 steps"
  compare "$name equals serial" "$serial" "$work/$name.jsonl" 1e-5 --grad-norms
}

case_ tp2_pp2_dp2 8 0.0 --set parallel.tensor.size=2 --set parallel.pipeline=2
case_ zero3_dp4 4 0.0 --set zero.stage=3
case_ tp4_2d 4 0.0 --set parallel.tensor.size=4 --set parallel.tensor.mode=2d
case_ tp2_pp2_dropout 4 0.1 --set parallel.tensor.size=2 --set parallel.pipeline=2
case_ sp2_tp2_dropout 4 0.1 --set parallel.sequence.size=2 --set parallel.tensor.size=2
case_ pp2_sp2_all_to_all_dropout 4 0.1 --set parallel.sequence.size=2 --set parallel.pipeline=2 \
  --set parallel.sequence.mode=all_to_all
case_ sp4_zigzag_dropout 4 0.1 --set parallel.sequence.size=4 --set parallel.sequence.layout=zigzag
case_ tp8_3d 8 0.0 --set parallel.tensor.size=8 --set parallel.tensor.mode=3d
case_ interleaved_zero2_dp2 4 0.0 --set parallel.pipeline.size=2 --set parallel.data=2 \
  --set parallel.pipeline.schedule=interleaved --set parallel.pipeline.virtual_stages=2 \
  --set zero.stage=2

# Checkpointed by the engine under tp 2 x pp 2 at step 3, resumed under ZeRO-3 over 4 data ranks:
# the six steps equal the serial run's.
ck=(--set checkpoint.dir="$work/ck" --set logging.metrics="$work/resumed.jsonl")
mpi 4 120 "$example" "${steps[@]}" "${ck[@]}" --set train.steps=3 --set parallel.tensor.size=2 \
  --set parallel.pipeline=2
expect_ok "3 steps under tp 2 x pp 2 with a checkpoint" "checkpoint saved"
mpi 4 120 "$example" "${steps[@]}" "${ck[@]}" --set zero.stage=3
expect_ok "resumed under ZeRO-3 x dp 4" "resumed from"
compare "resumed across layouts equals serial" "$work/serial-0.0.jsonl" "$work/resumed.jsonl" 1e-5 \
  --grad-norms

mpi 2 60 "$example" "${steps[@]}" --set parallel.tensor.size=2 --set parallel.tensor.sequence_parallel=true
expect_error "Megatron's sequence parallelism for a custom model" "which a model given through the C++ API (model.type custom) would have to scatter and gather itself" 30

run 30 "$tessera" train --config "$here/../../../tools/configs/gpt-tiny.json" \
  --set model.type=custom --set checkpoint.dir=
expect_error "tessera train refuses a custom model" "model.type custom is a model given through the C++ API"

finish
