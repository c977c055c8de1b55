#!/usr/bin/env bash
# The paper's sequence parallelism through `mpirun -np N tessera train --set
# parallel.sequence.size=S`: the tiny GPT with dropout on, each attention mode (ring, all_to_all,
# ring_flash) on 2 and 4 sequence ranks, sp 2 x ZeRO 2, sp 2 x pp 2, sp 2 x tp 2 in each mode and
# pp 2 x sp 2 x tp 2, sp 2 x tp 2d and sp 2 x tp 3d give, over 20 steps, the serial run's
# losses (1e-5 relative), validation loss and generated sample; a sequence-parallel checkpoint
# resumes serially; layouts that cannot split are refused naming the numbers. Then BERT (masked LM:
# the loss a mean over masked positions that fall unevenly on the shards) and ViT (the class token
# on rank 0, 7 x 7 patches + 1 = 50 tokens) with dropout on, in each mode on 2 ranks, sp 2 x ZeRO 2,
# sp 2 x dp 2, sp 2 x pp 2 and sp 2 x tp 2, give the serial (dp 2) run's losses within 1e-4 relative and its validation line.
# Usage: sequence_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=20 --set logging.log_every=1 --set train.micro_batch_size=4
        --set train.eval_every=4 --set train.sample_tokens=8 --set model.dropout=0.1
        --set model.attn_dropout=0.1 --set model.n_heads=4)

train() {  # train NAME N PATTERN ARGS...
  local name=$1 n=$2 pattern=$3
  shift 3
  mpi "$n" 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/$name.jsonl" "$@"
  cp "$LOG" "$work/$name.log"
  expect_ok "$name" "$pattern"
}

same_eval_and_sample() {  # NAME [REFERENCE=serial]
  local ref=${2:-serial} want got
  want=$(grep -o "val loss [0-9.]*" "$work/$ref.log")
  got=$(grep -o "val loss [0-9.]*" "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: validation equals $ref ($got)"
  else fail "$1: validation '$got' vs '$want'"; fi
  want=$(sed -n '/^sample/,$p' "$work/$ref.log")
  got=$(sed -n '/^sample/,$p' "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: the sample equals $ref"
  else fail "$1: sample differs: '$got' vs '$want'"; fi
}

train serial 1 "step 20/20" --set checkpoint.dir="$work/ck-serial"
for mode in ring all_to_all ring_flash; do
  for s in 2 4; do
    train "sp$s-$mode" "$s" "sequence parallel: $mode attention over $s ranks" \
      --set parallel.sequence.size=$s --set parallel.sequence.mode=$mode
    compare "sp $s $mode vs serial" "$work/serial.jsonl" "$work/sp$s-$mode.jsonl" 1e-5
  done
done
same_eval_and_sample sp4-ring_flash
same_eval_and_sample sp2-ring
# GPT is causal: ring_flash lays its positions out zigzag by default (every rank the same work);
# the contiguous layout, and zigzag under ring, give the same losses.
if grep -qF "zigzag layout: rank r holds chunks r and 7 - r of 8" "$work/sp4-ring_flash.log"; then
  echo "ok: GPT under ring_flash runs the zigzag layout"
else fail "sp4-ring_flash: the header does not name the zigzag layout"; fi
train sp2-ring_flash-contiguous 2 "positions of every sequence, contiguous" \
  --set parallel.sequence.size=2 --set parallel.sequence.layout=contiguous
compare "sp 2 ring_flash contiguous vs serial" "$work/serial.jsonl" \
  "$work/sp2-ring_flash-contiguous.jsonl" 1e-5
train sp2-ring-zigzag 2 "zigzag layout" --set parallel.sequence.size=2 \
  --set parallel.sequence.mode=ring --set parallel.sequence.layout=zigzag
compare "sp 2 ring zigzag vs serial" "$work/serial.jsonl" "$work/sp2-ring-zigzag.jsonl" 1e-5
# Data-parallel ranks draw their own dropout masks, so sp 2 x dp 2 is compared with dp 2.
train dp2 2 "data parallel 2" --set parallel.data=2
train sp2dp2 4 "data parallel 2" --set parallel.sequence=2
compare "sp 2 x dp 2 vs dp 2" "$work/dp2.jsonl" "$work/sp2dp2.jsonl" 1e-5
train sp2z2 2 "zero: stage 2" --set parallel.sequence=2 --set zero.stage=2 \
  --set checkpoint.dir="$work/ck-sp2"
compare "sp 2 x ZeRO 2 vs serial" "$work/serial.jsonl" "$work/sp2z2.jsonl" 1e-5

# sp 2 x pp 2 (2 blocks, one per stage): every stage holds its T/S positions of each sequence;
# the last stage gathers the positions' logits for evaluation and the sample.
train serial-l2 1 "step 20/20" --set model.n_layers=2
for mode in ring ring_flash; do
  train "pp2sp2-$mode" 4 "pipeline: 1f1b over 2 stages" --set model.n_layers=2 \
    --set parallel.pipeline=2 --set parallel.sequence.size=2 --set parallel.sequence.mode=$mode
  compare "pp 2 x sp 2 $mode vs serial" "$work/serial-l2.jsonl" "$work/pp2sp2-$mode.jsonl" 1e-5
done
same_eval_and_sample pp2sp2-ring_flash serial-l2
# sp 2 x tp 2 (1d: each tensor rank's heads cross the sequence ranks), and all three with pp 2.
for mode in ring all_to_all ring_flash; do
  train "sp2tp2-$mode" 4 "tensor parallel: 1d over 2 ranks" --set model.n_layers=2 \
    --set parallel.tensor.size=2 --set parallel.sequence.size=2 --set parallel.sequence.mode=$mode
  compare "sp 2 x tp 2 $mode vs serial" "$work/serial-l2.jsonl" "$work/sp2tp2-$mode.jsonl" 1e-5
done
same_eval_and_sample sp2tp2-ring serial-l2
train pp2sp2tp2 8 "pipeline: 1f1b over 2 stages" --set model.n_layers=2 --set parallel.pipeline=2 \
  --set parallel.tensor.size=2 --set parallel.sequence.size=2
compare "pp 2 x sp 2 x tp 2 vs serial" "$work/serial-l2.jsonl" "$work/pp2sp2tp2.jsonl" 1e-5
same_eval_and_sample pp2sp2tp2 serial-l2

# sp 2 inside a 2 x 2 grid (2D) and a 2 x 2 x 2 cube (3D), dropout on: every Dropout draws its
# block of the serial mask, cut in the batch, the sequence and the features at once.
train sp2tp2d 8 "tensor parallel: 2d over 4 ranks" --set model.n_layers=2 \
  --set parallel.tensor.size=4 --set parallel.tensor.mode=2d --set parallel.sequence.size=2
compare "sp 2 x tp 2d vs serial" "$work/serial-l2.jsonl" "$work/sp2tp2d.jsonl" 1e-5
same_eval_and_sample sp2tp2d serial-l2
train sp2tp3d 16 "tensor parallel: 3d over 8 ranks" --set model.n_layers=2 \
  --set parallel.tensor.size=8 --set parallel.tensor.mode=3d --set parallel.sequence.size=2
compare "sp 2 x tp 3d vs serial" "$work/serial-l2.jsonl" "$work/sp2tp3d.jsonl" 1e-5
same_eval_and_sample sp2tp3d serial-l2

# The checkpoint holds the serial model: it resumes on one process with the serial run's next losses.
for from in serial sp2; do
  mpi 1 120 "$tessera" train "${common[@]}" --set train.steps=22 --set checkpoint.dir="$work/ck-$from" \
    --set logging.metrics="$work/next-$from.jsonl"
  expect_ok "resume the $from checkpoint serially" "resumed from"
done
compare "next losses: sp 2 checkpoint resumed serially" "$work/next-serial.jsonl" \
  "$work/next-sp2.jsonl" 1e-5

# BERT and ViT: serial, each mode on 2 ranks, dp 2 against sp 2 x dp 2; dropout on.
same_eval() {  # same_eval NAME WANT_LOG PATTERN
  local want got
  want=$(grep -o "$3" "$work/$2.log")
  got=$(grep -o "$3" "$work/$1.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok: $1: validation equals $2 ($got)"
  else fail "$1: validation '$got' vs '$want'"; fi
}
gpt_common=("${common[@]}")  # train() reads common: each model's own below
for model in bert vit; do
  common=(--config "$here/../../../tools/configs/$model-tiny.json" --set train.steps=20
          --set schedule.warmup_steps=2 --set logging.log_every=1 --set train.batch_size=8
          --set train.eval_every=4 --set train.eval_batches=2 --set model.dropout=0.1
          --set model.attn_dropout=0.1 --set checkpoint.dir=)
  [ "$model" = vit ] && common+=(--set model.image_size=28)
  [ "$model" = bert ] && val="val mlm loss [0-9.]*" || val="val loss [0-9.]*"
  train "$model-serial" 1 "step 20/20"
  for mode in ring all_to_all ring_flash; do
    train "$model-sp2-$mode" 2 "sequence parallel: $mode attention over 2 ranks" \
      --set parallel.sequence.size=2 --set parallel.sequence.mode=$mode
    compare "$model sp 2 $mode vs serial" "$work/$model-serial.jsonl" "$work/$model-sp2-$mode.jsonl" 1e-4
    same_eval "$model-sp2-$mode" "$model-serial" "$val"
  done
  train "$model-sp2z2" 2 "zero: stage 2" --set parallel.sequence=2 --set zero.stage=2
  compare "$model sp 2 x ZeRO 2 vs serial" "$work/$model-serial.jsonl" "$work/$model-sp2z2.jsonl" 1e-4
  train "$model-dp2" 2 "data parallel 2" --set parallel.data=2
  train "$model-sp2dp2" 4 "data parallel 2" --set parallel.sequence=2
  compare "$model sp 2 x dp 2 vs dp 2" "$work/$model-dp2.jsonl" "$work/$model-sp2dp2.jsonl" 1e-4
  same_eval "$model-sp2dp2" "$model-dp2" "$val"
  train "$model-pp2sp2" 4 "pipeline: 1f1b over 2 stages" --set parallel.pipeline=2 \
    --set parallel.sequence=2
  compare "$model pp 2 x sp 2 vs serial" "$work/$model-serial.jsonl" "$work/$model-pp2sp2.jsonl" 1e-4
  same_eval "$model-pp2sp2" "$model-serial" "$val"
  train "$model-sp2tp2" 4 "tensor parallel: 1d over 2 ranks" --set parallel.sequence=2 \
    --set parallel.tensor.size=2
  compare "$model sp 2 x tp 2 vs serial" "$work/$model-serial.jsonl" "$work/$model-sp2tp2.jsonl" 1e-4
  same_eval "$model-sp2tp2" "$model-serial" "$val"
done
common=("${gpt_common[@]}")
# ViT's 50 tokens do not split over 4 ranks: padded to 52 with masked keys, dropout off.
common=(--config "$here/../../../tools/configs/vit-tiny.json" --set train.steps=4
        --set schedule.warmup_steps=2 --set logging.log_every=1 --set train.batch_size=8
        --set train.eval_every=4 --set train.eval_batches=2 --set model.image_size=28
        --set checkpoint.dir=)
train vit-serial-nodrop 1 "step 4/4"
train vit-sp4-padded 4 "sequence parallel: ring_flash attention over 4 ranks" --set parallel.sequence=4
compare "vit sp 4 padded (50 tokens to 52) vs serial" "$work/vit-serial-nodrop.jsonl" \
  "$work/vit-sp4-padded.jsonl" 1e-4
same_eval vit-sp4-padded vit-serial-nodrop "val loss [0-9.]*"
common=("${gpt_common[@]}")
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/vit-tiny.json" --set parallel.sequence=2 \
  --set model.dropout=0.1
expect_error "ViT tokens not divisible, with dropout" \
  "num_patches + 1 = (model.image_size 32 / model.patch_size 4)^2 + 1 = 65 (the class token, held by rank 0, and the patches) is not divisible by 2, so it is padded to 66 tokens with masked keys: expected model.dropout and model.attn_dropout 0" 30
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/bert-tiny.json" --set parallel.sequence.size=2 \
  --set train.seq_len=31
expect_error "BERT odd sequence length" \
  "sequence length (train.seq_len or model.max_positions) 31 divisible by 2" 30
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/vit-tiny.json" --set parallel.sequence.size=2 \
  --set parallel.sequence.mode=all_to_all --set model.image_size=28 --set model.n_heads=3 --set model.d_model=96
expect_error "ViT heads for all_to_all" "model.n_heads 3 divisible by 2" 30

mpi 2 60 "$tessera" train "${common[@]}" --set parallel.sequence.size=2 \
  --set parallel.sequence.mode=ring --set train.seq_len=31
expect_error "odd sequence length" "sequence length (train.seq_len or model.context_length) 31 divisible by 2" 30
mpi 2 60 "$tessera" train "${common[@]}" --set parallel.sequence=2 --set train.seq_len=30
expect_error "zigzag chunks" "sequence length (train.seq_len or model.context_length) 30 divisible by 2 x 2 = 4 (the zigzag layout's chunks)" 30
mpi 2 60 "$tessera" train --config "$here/../../../tools/configs/bert-tiny.json" --set parallel.sequence.size=2 \
  --set parallel.sequence.layout=zigzag
expect_error "BERT zigzag" "zigzag balances causal attention, and BERT attends both ways" 30
mpi 2 60 "$tessera" train "${common[@]}" --set parallel.sequence.size=2 \
  --set parallel.sequence.mode=all_to_all --set model.n_heads=1 --set model.d_model=32
expect_error "heads for all_to_all" "model.n_heads 1 divisible by 2" 30
mpi 4 60 "$tessera" train "${common[@]}" --set parallel.sequence.size=2 --set parallel.tensor.size=2 \
  --set parallel.sequence.mode=all_to_all --set model.n_heads=2
expect_error "heads for all_to_all under tp 2" \
  "model.n_heads 2 divisible by the tensor ranks' head split 2 x 2 = 4" 30
mpi 4 60 "$tessera" train "${common[@]}" --set parallel.sequence.size=2 --set parallel.tensor.size=2 \
  --set parallel.tensor.sequence_parallel=true
expect_error "two sequence splits" "would both split the positions" 30
finish
