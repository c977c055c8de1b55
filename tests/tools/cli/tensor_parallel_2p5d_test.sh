#!/usr/bin/env bash
# `mpirun -np 8 tessera train` with parallel.tensor.mode 2.5d (Tesseract: a 2 x 2 SUMMA grid
# stacked 2 deep, each depth layer on its half of the batch) gives the serial run's losses within
# 1e-4 relative for GPT, BERT and ViT (tiny, a few steps, dropout on), read from the metrics files,
# and the serial run's gradient norms (clipping on: the weight blocks repeated over the depth layers
# count once). GPT's 2.5D checkpoint holds the serial model: resumed on one process it gives the
# same next losses as the serial checkpoint resumed. Layouts that do not split (the micro-batch
# over depth x q, the heads over q) are refused naming the numbers.
# Usage: tensor_parallel_2p5d_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
work=$TMPDIR/work
mkdir -p "$work"
tp=(--set parallel.tensor.size=8 --set parallel.tensor.mode=2.5d --set parallel.tensor.depth=2)

# GPT: the batch of 8 is 4 chunks of 2 (depth 2 x grid rows 2); a tight clip so every step clips.
gcommon=(--config "$here/tiny_gpt.json" --set train.steps=6 --set train.sample_tokens=8
         --set logging.log_every=1 --set model.dropout=0.1 --set model.attn_dropout=0.1
         --set train.grad_clip=0.05)
mpi 1 300 "$tessera" train "${gcommon[@]}" --set logging.metrics="$work/gpt-serial.jsonl" \
  --set checkpoint.dir="$work/gpt-serial"
expect_ok "gpt serial" "step 6/6"
mpi 8 300 "$tessera" train "${gcommon[@]}" "${tp[@]}" --set logging.metrics="$work/gpt-2p5d.jsonl" \
  --set checkpoint.dir="$work/gpt-2p5d"
expect_ok "gpt tp 2.5d" "tensor parallel: 2.5d over 8 ranks, groups [0,1,2,3,4,5,6,7]"
compare "gpt serial vs tp 2.5d" "$work/gpt-serial.jsonl" "$work/gpt-2p5d.jsonl" 1e-4 --grad-norms
# The 2.5D checkpoint, saved under serial names from depth 0's blocks, is the serial model.
for run in serial 2p5d; do
  mpi 1 120 "$tessera" train "${gcommon[@]}" --set train.steps=8 \
    --set logging.metrics="$work/gpt-$run-resumed.jsonl" --set checkpoint.dir="$work/gpt-$run"
  expect_ok "gpt $run checkpoint resumed serially" "resumed from"
done
compare "next losses: serial and tp 2.5d checkpoints resumed" "$work/gpt-serial-resumed.jsonl" \
  "$work/gpt-2p5d-resumed.jsonl" 1e-4 --grad-norms

mpi 8 60 "$tessera" train --config "$here/tiny_gpt.json" "${tp[@]}" --set train.batch_size=6
expect_error "2.5d: micro-batch not divisible" \
  "expected train.micro_batch_size 6 divisible by depth x q = 2 x 2 = 4" 30
mpi 8 60 "$tessera" train --config "$here/tiny_gpt.json" "${tp[@]}" --set model.n_heads=1
expect_error "2.5d: heads not divisible" \
  "parallel.tensor.mode 2.5d on a 2 x 2 grid of depth 2: expected model.n_heads 1 divisible by q = 2" 30

# BERT (vocab-parallel word embeddings, tied MLM decoder, padding masks) and ViT (patches, class
# token, Classifier2D) with their configs' clipping (1.0).
for model in bert vit; do
  mcfg=$here/../../../tools/configs/$model-tiny.json
  mcommon=(--config "$mcfg" --set train.steps=4 --set schedule.warmup_steps=2 --set logging.log_every=1
           --set model.dropout=0.1 --set model.attn_dropout=0.1 --set train.batch_size=8
           --set train.eval_every=0)
  [ "$model" = vit ] && mcommon+=(--set model.image_size=16)
  mpi 1 300 "$tessera" train "${mcommon[@]}" --set logging.metrics="$work/$model-serial.jsonl" \
    --set checkpoint.dir="$work/$model-serial"
  expect_ok "$model serial" "step 4/4"
  mpi 8 300 "$tessera" train "${mcommon[@]}" "${tp[@]}" --set logging.metrics="$work/$model-2p5d.jsonl" \
    --set checkpoint.dir="$work/$model-2p5d"
  expect_ok "$model tp 2.5d" "tensor parallel: 2.5d over 8 ranks"
  compare "$model serial vs tp 2.5d" "$work/$model-serial.jsonl" "$work/$model-2p5d.jsonl" 1e-4 --grad-norms
done
finish
