#!/usr/bin/env bash
# `mpirun -np 8 tessera train` with parallel.tensor.mode 3d (a 2 x 2 x 2 cube: the batch cut over
# the cube side, the features and heads in q^2 chunks, every parameter in q^3 pieces) gives the
# serial run's losses within 1e-4 relative for GPT (tiny, a few steps, dropout on), read from the
# metrics files, and the serial run's gradient norms (clipping on); BERT and ViT (tiny, dropout on)
# within 1e-5, with the serial validation lines. The 3D checkpoint holds the serial model: resumed
# on one process it gives the same next losses as the serial checkpoint resumed. Layouts that do
# not split (heads over q^2, the micro-batch over q, the vocabulary over q^2 (BERT: q^3), a ViT
# patch's features over q^2) are refused naming the numbers.
# Usage: tensor_parallel_3d_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
work=$TMPDIR/work
mkdir -p "$work"
tp=(--set parallel.tensor.size=8 --set parallel.tensor.mode=3d)

# GPT with 4 heads (q^2 = 4): the batch of 8 is 2 chunks of 4; a tight clip so every step clips.
gcommon=(--config "$here/tiny_gpt.json" --set model.n_heads=4 --set train.steps=6
         --set train.sample_tokens=8 --set logging.log_every=1 --set model.dropout=0.1
         --set model.attn_dropout=0.1 --set train.grad_clip=0.05)
mpi 1 300 "$tessera" train "${gcommon[@]}" --set logging.metrics="$work/gpt-serial.jsonl" \
  --set checkpoint.dir="$work/gpt-serial"
expect_ok "gpt serial" "step 6/6"
mpi 8 300 "$tessera" train "${gcommon[@]}" "${tp[@]}" --set logging.metrics="$work/gpt-3d.jsonl" \
  --set checkpoint.dir="$work/gpt-3d"
expect_ok "gpt tp 3d" "tensor parallel: 3d over 8 ranks, groups [0,1,2,3,4,5,6,7]"
compare "gpt serial vs tp 3d" "$work/gpt-serial.jsonl" "$work/gpt-3d.jsonl" 1e-4 --grad-norms
# The 3D checkpoint, saved under serial names with global shapes, is the serial model.
for run in serial 3d; do
  mpi 1 120 "$tessera" train "${gcommon[@]}" --set train.steps=8 \
    --set logging.metrics="$work/gpt-$run-resumed.jsonl" --set checkpoint.dir="$work/gpt-$run"
  expect_ok "gpt $run checkpoint resumed serially" "resumed from"
done
compare "next losses: serial and tp 3d checkpoints resumed" "$work/gpt-serial-resumed.jsonl" \
  "$work/gpt-3d-resumed.jsonl" 1e-4 --grad-norms

cube="parallel.tensor.mode 3d on a 2 x 2 x 2 cube"
mpi 8 60 "$tessera" train --config "$here/tiny_gpt.json" "${tp[@]}"
expect_error "3d: heads not divisible" "$cube: expected model.n_heads 2 divisible by q^2 = 4" 30
mpi 8 60 "$tessera" train --config "$here/tiny_gpt.json" "${tp[@]}" --set model.n_heads=4 \
  --set train.batch_size=5
expect_error "3d: micro-batch not divisible" \
  "expected train.micro_batch_size 5 divisible by q = 2" 30
mpi 8 60 "$tessera" train --config "$here/tiny_gpt.json" "${tp[@]}" --set model.n_heads=4 \
  --set model.vocab_size=254
expect_error "3d: vocabulary not divisible" \
  "$cube: expected model.vocab_size 254 divisible by q^2 = 4" 30

# BERT (vocab-parallel word embeddings, tied MLM decoder with its bias in q^3 pieces) and ViT
# (PatchEmbedding3D, class token and positions in q^3 pieces, Classifier3D) with dropout on and
# their configs' clipping (1.0): the serial losses and gradient norms within 1e-5, and the same
# validation line (evaluated at steps 3 and 6).
for model in bert vit; do
  mcfg=$here/../../../tools/configs/$model-tiny.json
  mcommon=(--config "$mcfg" --set train.steps=6 --set schedule.warmup_steps=2
           --set logging.log_every=1 --set model.dropout=0.1 --set model.attn_dropout=0.1
           --set model.n_heads=4 --set train.batch_size=8 --set train.eval_every=3
           --set train.eval_batches=2)
  [ "$model" = bert ] && mcommon+=(--set model.vocab_size=264 --set train.seq_len=32)
  [ "$model" = vit ] && mcommon+=(--set model.image_size=16)
  mpi 1 300 "$tessera" train "${mcommon[@]}" --set logging.metrics="$work/$model-serial.jsonl" \
    --set checkpoint.dir="$work/$model-serial"
  expect_ok "$model serial" "step 6/6"
  grep -E "val " "$LOG" >"$work/$model-serial.val"
  mpi 8 300 "$tessera" train "${mcommon[@]}" "${tp[@]}" --set logging.metrics="$work/$model-3d.jsonl" \
    --set checkpoint.dir="$work/$model-3d"
  expect_ok "$model tp 3d" "tensor parallel: 3d over 8 ranks"
  grep -E "val " "$LOG" >"$work/$model-3d.val"
  compare "$model serial vs tp 3d" "$work/$model-serial.jsonl" "$work/$model-3d.jsonl" 1e-5 \
    --grad-norms
  if [ "$(grep -c . "$work/$model-serial.val")" -ne 2 ]; then
    fail "$model serial: expected 2 validation lines, got: $(cat "$work/$model-serial.val")"
  elif diff <(grep -oE "[|] val .*" "$work/$model-serial.val") \
      <(grep -oE "[|] val .*" "$work/$model-3d.val") >/dev/null; then
    echo "ok: $model validation equal: $(grep -oE "[|] val .*" "$work/$model-3d.val" | tail -1)"
  else
    fail "$model validation: serial $(cat "$work/$model-serial.val") vs 3d $(cat "$work/$model-3d.val")"
  fi
done
# BERT's bundled vocabulary (260) does not split its decoder's bias over the 8 ranks; a patch of
# 3 x 3^2 = 27 features does not split in q^2 chunks.
mpi 8 60 "$tessera" train --config "$here/../../../tools/configs/bert-tiny.json" "${tp[@]}" \
  --set model.n_heads=4
expect_error "3d: bert vocabulary not divisible" \
  "$cube: expected model.vocab_size 260 divisible by q^3 = 8 (the token table is cut as a Linear3D weight, the masked-LM decoder's bias over all ranks)" 30
mpi 8 60 "$tessera" train --config "$here/../../../tools/configs/vit-tiny.json" "${tp[@]}" \
  --set model.image_size=18 --set model.patch_size=3
expect_error "3d: vit patch not divisible" \
  "$cube: expected a patch's features (model.in_channels 3 x model.patch_size 3^2 = 27) divisible by q^2 = 4" 30
finish
