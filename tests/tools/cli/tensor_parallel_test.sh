#!/usr/bin/env bash
# `mpirun -np N tessera train` with parallel.tensor.size: 1D tensor parallelism on 2 ranks gives
# the serial run's losses and tp 2 x dp 2 on 4 the dp 2 run's (1e-4 relative, from the metrics
# files), with dropout on; the tensor-parallel checkpoint holds the serial model (eval on one process gives its
# loss; it resumes serially) and a serial checkpoint resumes under tensor parallelism with the
# serial run's next losses; impossible layouts are refused naming the numbers. Sequence
# parallelism (parallel.tensor.sequence_parallel) on tp 2 gives the serial run's losses too, for
# GPT, BERT and ViT, and is refused outside 1d, with tensor size 1 and for a sequence that does not
# split (GPT's and BERT's T, ViT's patches plus the class token). 2D tensor parallelism
# (parallel.tensor.mode 2d, SUMMA on a 2 x 2 grid of 4 ranks) gives the serial run's losses within
# 1e-5 for GPT, BERT and ViT, dropout on, and x dp 2 on 8 ranks the dp 2 run's; its checkpoint
# resumes serially; what does not split over the grid is refused naming the numbers.
# Usage: tensor_parallel_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=20 --set train.sample_tokens=8 --set logging.log_every=1
        --set model.dropout=0.1 --set model.attn_dropout=0.1)

mpi 1 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/serial.jsonl" \
  --set checkpoint.dir="$work/serial"
expect_ok "serial" "step 20/20"
mpi 2 300 "$tessera" train "${common[@]}" --set parallel.tensor.size=2 \
  --set logging.metrics="$work/tp2.jsonl" --set checkpoint.dir="$work/tp2"
expect_ok "tp 2" "tensor parallel: 1d over 2 ranks, groups [0,1]"
compare "serial vs tp 2" "$work/serial.jsonl" "$work/tp2.jsonl"
# LayerNorm, dropout and the residual stream on sequence shards; the closing sample's windows of
# every length are padded to a multiple of 2.
mpi 2 300 "$tessera" train "${common[@]}" --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true --set logging.metrics="$work/tp2sp.jsonl"
expect_ok "tp 2 sequence parallel" "groups [0,1], sequence parallel"
compare "serial vs tp 2 sequence parallel" "$work/serial.jsonl" "$work/tp2sp.jsonl"
# Data-parallel ranks draw their own dropout masks, so tp 2 x dp 2 equals dp 2.
mpi 2 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/dp2.jsonl"
expect_ok "dp 2" "ranks: 2 (data parallel 2)"
mpi 4 300 "$tessera" train "${common[@]}" --set parallel.tensor.size=2 \
  --set logging.metrics="$work/tp2dp2.jsonl"
expect_ok "tp 2 x dp 2" "ranks: 4 (data parallel 2)"
compare "dp 2 vs tp 2 x dp 2" "$work/dp2.jsonl" "$work/tp2dp2.jsonl"

# The tensor-parallel checkpoint is the serial model: it resumes on one process, and the serial
# checkpoint resumes under tensor parallelism, with the same next losses.
mpi 1 120 "$tessera" train "${common[@]}" --set train.steps=22 --set logging.metrics="$work/tp2_resumed_serially.jsonl" \
  --set checkpoint.dir="$work/tp2"
expect_ok "tp 2 checkpoint resumed serially" "resumed from"
mpi 2 120 "$tessera" train "${common[@]}" --set train.steps=22 --set parallel.tensor.size=2 \
  --set logging.metrics="$work/serial_resumed_tp2.jsonl" --set checkpoint.dir="$work/serial"
expect_ok "serial checkpoint resumed under tp 2" "resumed from"
compare "next losses: both resumes" "$work/tp2_resumed_serially.jsonl" "$work/serial_resumed_tp2.jsonl"

# 2D: the batch splits over the 2 grid rows, the features and heads over the 2 grid columns (the
# tensor group's 4 ranks are one grid); the closing sample's single prompt is padded to 2 rows.
mpi 4 300 "$tessera" train "${common[@]}" --set parallel.tensor.size=4 --set parallel.tensor.mode=2d \
  --set logging.metrics="$work/tp2d.jsonl" --set checkpoint.dir="$work/tp2d"
expect_ok "tp 2d" "tensor parallel: 2d over 4 ranks, groups [0,1,2,3]"
compare "serial vs tp 2d" "$work/serial.jsonl" "$work/tp2d.jsonl" 1e-5
mpi 8 300 "$tessera" train "${common[@]}" --set parallel.tensor.size=4 --set parallel.tensor.mode=2d \
  --set logging.metrics="$work/tp2d_dp2.jsonl"
expect_ok "tp 2d x dp 2" "ranks: 8 (data parallel 2)"
compare "dp 2 vs tp 2d x dp 2" "$work/dp2.jsonl" "$work/tp2d_dp2.jsonl" 1e-5
mpi 1 120 "$tessera" train "${common[@]}" --set train.steps=22 \
  --set logging.metrics="$work/tp2d_resumed_serially.jsonl" --set checkpoint.dir="$work/tp2d"
expect_ok "tp 2d checkpoint resumed serially" "resumed from"
compare "next losses: tp 2d checkpoint resumed serially" "$work/serial_resumed_tp2.jsonl" \
  "$work/tp2d_resumed_serially.jsonl"
mpi 4 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=4 --set parallel.tensor.mode=2d \
  --set model.n_heads=1
expect_error "2d: heads not divisible" "expected model.n_heads 1 divisible by q = 2" 30
mpi 4 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=4 --set parallel.tensor.mode=2d \
  --set train.batch_size=3
expect_error "2d: micro-batch not divisible" "expected train.micro_batch_size 3 divisible by q = 2" 30

mpi 2 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=2 --set model.n_heads=1
expect_error "heads not divisible" "n_heads 1 divisible by the tensor-parallel size 2" 30
mpi 4 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=4 --set parallel.tensor.mode=2d \
  --set parallel.tensor.sequence_parallel=true
expect_error "sequence parallel outside 1d" \
  "expected parallel.tensor.sequence_parallel only with parallel.tensor.mode 1d" 30
grep -qF "got mode '2d'" "$LOG" || fail "sequence parallel outside 1d: the mode is not named"
mpi 1 60 "$tessera" train --config "$cfg" --set parallel.tensor.sequence_parallel=true
expect_error "sequence parallel with tensor size 1" \
  "expected parallel.tensor.sequence_parallel with parallel.tensor.size > 1" 30
mpi 2 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true --set train.seq_len=15
expect_error "sequence parallel, T not divisible" \
  "expected the sequence length (train.seq_len or model.context_length) 15 divisible by parallel.tensor.size 2" 30
# BERT (vocab-parallel word embeddings and tied MLM decoder) and ViT under tp 2 equal their serial
# runs, dropout on, with sequence parallelism too (BERT's T 64 and ViT's 7 x 7 patches + the class
# token, 50 tokens at image_size 28, split over 2 ranks).
for model in bert vit; do
  mcfg=$here/../../../tools/configs/$model-tiny.json
  mcommon=(--config "$mcfg" --set train.steps=6 --set schedule.warmup_steps=2 --set logging.log_every=1
           --set model.dropout=0.1 --set model.attn_dropout=0.1)
  [ "$model" = vit ] && mcommon+=(--set model.image_size=28)
  mpi 1 300 "$tessera" train "${mcommon[@]}" --set checkpoint.dir="$work/$model-serial" \
    --set logging.metrics="$work/$model-serial.jsonl"
  expect_ok "$model serial" "step 6/6"
  mpi 2 300 "$tessera" train "${mcommon[@]}" --set parallel.tensor.size=2 \
    --set checkpoint.dir="$work/$model-tp2" --set logging.metrics="$work/$model-tp2.jsonl"
  expect_ok "$model tp 2" "tensor parallel: 1d over 2 ranks"
  compare "$model serial vs tp 2" "$work/$model-serial.jsonl" "$work/$model-tp2.jsonl"
  mpi 2 300 "$tessera" train "${mcommon[@]}" --set parallel.tensor.size=2 \
    --set parallel.tensor.sequence_parallel=true --set checkpoint.dir="$work/$model-tp2sp" \
    --set logging.metrics="$work/$model-tp2sp.jsonl"
  expect_ok "$model tp 2 sequence parallel" "groups [0,1], sequence parallel"
  compare "$model serial vs tp 2 sequence parallel" "$work/$model-serial.jsonl" \
    "$work/$model-tp2sp.jsonl"
  mpi 4 300 "$tessera" train "${mcommon[@]}" --set parallel.tensor.size=4 \
    --set parallel.tensor.mode=2d --set checkpoint.dir="$work/$model-tp2d" \
    --set logging.metrics="$work/$model-tp2d.jsonl"
  expect_ok "$model tp 2d" "tensor parallel: 2d over 4 ranks"
  compare "$model serial vs tp 2d" "$work/$model-serial.jsonl" "$work/$model-tp2d.jsonl" 1e-5
done
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/bert-tiny.json" \
  --set parallel.tensor.size=2 --set parallel.tensor.sequence_parallel=true --set train.seq_len=15
expect_error "sequence parallel for BERT, T not divisible" \
  "expected the sequence length (train.seq_len or model.max_positions) 15 divisible by parallel.tensor.size 2" 30
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/vit-tiny.json" \
  --set parallel.tensor.size=2 --set parallel.tensor.sequence_parallel=true
expect_error "sequence parallel for ViT, tokens not divisible" \
  "expected ViT's token sequence (num_patches + 1 = (model.image_size 32 / model.patch_size 4)^2 + 1 = 65) divisible by parallel.tensor.size 2" 30
finish
