#!/usr/bin/env bash
# Hugging Face directories from and into `tessera train`: `checkpoint export --format hf` of tiny
# BERT and ViT checkpoints (headers in BertForMaskedLM's / ViTForImageClassification's names and
# layouts, config.json's fields); `model.init_from {"hf": DIR}` of a GPT export starts serially and
# under tp 2 from exactly the exported weights (the same final eval as resuming the checkpoint
# with lr 0; tp 2 and pp 2 give the serial losses); BERT and ViT exports start their models; a
# resumed run ignores init_from; another width or
# model type is refused naming the tensor (or config) and the directory.
# Usage: hf_init_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
quiet=(--set train.sample_tokens=0 --set train.eval_batches=1 --set logging.log_every=1)

# "NAME DTYPE SHAPE" per tensor of a safetensors file, read straight from its header.
headers() {
  python3 - "$1" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", data, 0)[0]
for name, e in sorted(json.loads(data[8:8 + n]).items()):
    if name != "__metadata__":
        print(name, e["dtype"], ",".join(map(str, e["shape"])))
PY
}
# last_eval METRICS: the last evaluation record of a metrics file, without its timing fields.
last_eval() {
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"eval\"' in l][-1]; print({k: v for k, v in r.items() if 'loss' in k or 'ppl' in k})" "$1"
}

# BERT: a tiny MLM model -> BertForMaskedLM's names (the encoder under "bert."), no tied decoder.
configs=$here/../../../tools/configs
bert=(--config "$configs/bert-tiny.json" --set model.max_positions=32 --set model.n_layers=1
      --set model.n_heads=2 --set model.d_model=16 --set model.mlp_hidden=32 --set schedule.type=constant
      --set checkpoint.dir= --set logging.metrics=)
run 120 "$tessera" train "${quiet[@]}" "${bert[@]}" --set train.steps=2 \
  --set checkpoint.dir="$work/bert_ck"
expect_ok "tiny BERT run" "checkpoint saved"
run 60 "$tessera" checkpoint export "$work/bert_ck" "$work/bert_hf" --format hf
expect_ok "export BERT" "Hugging Face's BERT layout"
rows=$(headers "$work/bert_hf/model.safetensors")
if grep -qx "bert.encoder.layer.0.attention.self.query.weight F32 16,16" <<<"$rows" &&
   grep -qx "bert.embeddings.LayerNorm.weight F32 16" <<<"$rows" &&
   grep -qx "cls.predictions.bias F32 260" <<<"$rows" &&
   grep -qx "cls.predictions.transform.dense.weight F32 16,16" <<<"$rows" &&
   ! grep -q "decoder\|c_attn\|pooler" <<<"$rows" &&
   [ "$(wc -l <<<"$rows")" -eq 26 ]; then
  echo "ok: the BERT export holds BertForMaskedLM's names and layout"
else fail "BERT export: unexpected tensors: $rows"; fi
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert (c['model_type'], c['architectures'], c['hidden_size'], c['num_hidden_layers'], c['num_attention_heads'], c['intermediate_size'], c['vocab_size'], c['max_position_embeddings'], c['hidden_act']) == ('bert', ['BertForMaskedLM'], 16, 1, 2, 32, 260, 32, 'gelu'), c" \
  "$work/bert_hf/config.json" >"$LOG" 2>&1 && echo "ok: BERT config.json is BertConfig's" || fail "BERT config.json: $(cat "$LOG")"

# ViT: ViTForImageClassification, the patch projection as a Conv2d weight (D, C, P, P).
vit=(--config "$configs/vit-tiny.json" --set model.image_size=8 --set model.num_classes=3
     --set model.n_layers=1 --set model.n_heads=2 --set model.d_model=16 --set data.builtin_images=64
     --set schedule.type=constant --set checkpoint.dir= --set logging.metrics=)
run 120 "$tessera" train "${quiet[@]}" "${vit[@]}" --set train.steps=2 \
  --set checkpoint.dir="$work/vit_ck"
expect_ok "tiny ViT run" "checkpoint saved"
run 60 "$tessera" checkpoint export "$work/vit_ck" "$work/vit_hf" --format hf
expect_ok "export ViT" "Hugging Face's ViT layout"
rows=$(headers "$work/vit_hf/model.safetensors")
if grep -qx "vit.embeddings.patch_embeddings.projection.weight F32 16,3,4,4" <<<"$rows" &&
   grep -qx "vit.embeddings.position_embeddings F32 1,5,16" <<<"$rows" &&
   grep -qx "vit.encoder.layer.0.attention.attention.value.bias F32 16" <<<"$rows" &&
   grep -qx "vit.layernorm.weight F32 16" <<<"$rows" &&
   grep -qx "classifier.weight F32 3,16" <<<"$rows" &&
   [ "$(wc -l <<<"$rows")" -eq 24 ]; then
  echo "ok: the ViT export holds ViTForImageClassification's names and layout"
else fail "ViT export: unexpected tensors: $rows"; fi
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert (c['model_type'], c['architectures'], c['image_size'], c['patch_size'], c['num_channels'], c['hidden_size'], len(c['id2label']), c['qkv_bias']) == ('vit', ['ViTForImageClassification'], 8, 4, 3, 16, 3, True), c" \
  "$work/vit_hf/config.json" >"$LOG" 2>&1 && echo "ok: ViT config.json is ViTConfig's" || fail "ViT config.json: $(cat "$LOG")"

# The BERT and ViT exports start training runs of their models (BERT's tied decoder included).
for m in bert vit; do
  [ "$m" = bert ] && margs=("${bert[@]}") || margs=("${vit[@]}")
  run 120 "$tessera" train "${quiet[@]}" "${margs[@]}" --set train.steps=1 \
    --set 'model.init_from={"hf": "'"$work/${m}_hf"'"}'
  expect_ok "$m init_from its export" "weights from Hugging Face $work/${m}_hf"
done

# GPT (2 layers, so that pp 2 has a layer per stage): 3 steps, checkpoint, export.
gpt=(--config "$cfg" "${quiet[@]}" --set model.n_layers=2)
run 120 "$tessera" train "${gpt[@]}" --set train.steps=3 --set checkpoint.dir="$work/ck"
expect_ok "tiny GPT run" "checkpoint saved"
run 60 "$tessera" checkpoint export "$work/ck" "$work/hf" --format hf
expect_ok "export GPT" "Hugging Face's GPT-2 layout"
# The exported weights and the checkpoint's, not trained further (lr 0): one final evaluation.
lr0=(--set optimizer.lr=0 --set optimizer.weight_decay=0)
cp -r "$work/ck" "$work/ck_resume"
run 120 "$tessera" train "${gpt[@]}" "${lr0[@]}" --set train.steps=4 \
  --set checkpoint.dir="$work/ck_resume" --set logging.metrics="$work/resume.jsonl"
expect_ok "resume the checkpoint with lr 0" "resumed from"
init=(--set 'model.init_from={"hf": "'"$work/hf"'"}')
run 120 "$tessera" train "${gpt[@]}" "${lr0[@]}" "${init[@]}" --set train.steps=1 \
  --set logging.metrics="$work/init.jsonl"
expect_ok "init_from the export, lr 0" "weights from Hugging Face $work/hf"
a=$(last_eval "$work/resume.jsonl") b=$(last_eval "$work/init.jsonl")
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ok: init_from evaluates exactly as the resumed checkpoint: $b" ||
  fail "init_from eval '$b' vs the resumed checkpoint's '$a'"
# Training from the export: serially and under tp 2 (2 ranks), the same losses.
run 120 "$tessera" train "${gpt[@]}" "${init[@]}" --set train.steps=3 \
  --set logging.metrics="$work/serial.jsonl"
expect_ok "train from the export serially" "weights from Hugging Face"
cp "$LOG" "$work/serial.log"
mpi 2 180 "$tessera" train "${gpt[@]}" "${init[@]}" --set train.steps=3 \
  --set parallel.tensor.size=2 --set logging.metrics="$work/tp2.jsonl"
expect_ok "train from the export under tp 2" "weights from Hugging Face"
compare "init_from under tp 2 vs serially" "$work/serial.jsonl" "$work/tp2.jsonl"
mpi 2 180 "$tessera" train "${gpt[@]}" "${init[@]}" --set train.steps=3 \
  --set parallel.pipeline=2 --set logging.metrics="$work/pp2.jsonl"
expect_ok "train from the export under pp 2" "weights from Hugging Face"
compare "init_from under pp 2 vs serially" "$work/serial.jsonl" "$work/pp2.jsonl"
fresh=$(grep -o '"loss":[0-9.e-]*' "$work/serial.jsonl" | head -1)
run 120 "$tessera" train "${gpt[@]}" --set train.steps=1 --set logging.metrics="$work/fresh.jsonl"
[ "$(grep -o '"loss":[0-9.e-]*' "$work/fresh.jsonl" | head -1)" != "$fresh" ] &&
  echo "ok: the step-1 loss from the export ($fresh) is not a fresh model's" ||
  fail "init_from's step-1 loss equals a fresh model's: $fresh"
# A run that resumes takes its checkpoint, not init_from.
run 120 "$tessera" train "${gpt[@]}" "${init[@]}" --set train.steps=4 \
  --set checkpoint.dir="$work/ck"
expect_ok "a resumed run ignores init_from" "model.init_from $work/hf ignored: resuming"
# Refused: another width (naming the tensor and the directory), another model type.
run 60 "$tessera" train "${gpt[@]}" "${init[@]}" --set model.d_model=48
expect_error "init_from into a wider GPT" "$work/hf: tensor 'h.0.attn.c_attn.bias' has shape (96) in the Hugging Face weights, this model expects (144)"
run 60 "$tessera" train "${quiet[@]}" "${bert[@]}" "${init[@]}"
expect_error "init_from a GPT-2 into a BERT" "$work/hf/config.json: expected a bert config.json"
run 60 "$tessera" train --config "$cfg" "${quiet[@]}" --set 'model.init_from={"hub": "x"}'
expect_error "init_from without hf" "model.init_from"
finish
