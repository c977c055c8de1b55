#!/usr/bin/env bash
# `tessera checkpoint inspect`: a tiny run's checkpoint lists the step, model, layout and every
# tensor with the shapes and bytes its safetensors headers hold (read independently here), all
# checksums verified; a 2-rank ZeRO-1 checkpoint shows that layout; a truncated file, a flipped
# byte and a missing file are each reported naming the tensor (or file) with exit code 1;
# `checkpoint export --format hf` writes a Hugging Face GPT-2 directory.
# Usage: checkpoint_inspect_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=3 --set train.sample_tokens=0 --set train.eval_batches=1)

# Facts read straight from the safetensors headers: "NAME DTYPE SHAPE BYTES START END" per tensor
# (SHAPE as 96,32; START/END absolute in the file), for the script's checks.
headers() {
  python3 - "$1" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", data, 0)[0]
for name, e in json.loads(data[8:8 + n]).items():
    if name == "__metadata__":
        continue
    b, end = e["data_offsets"]
    print(name, e["dtype"], ",".join(map(str, e["shape"])), end - b, 8 + n + b, 8 + n + end)
EOF
}

run 120 "$tessera" train "${common[@]}" --set checkpoint.dir="$work/ck"
expect_ok "tiny run" "checkpoint saved"
ck=$work/ck/step-00000003
run 60 "$tessera" checkpoint inspect "$work/ck"
expect_ok "inspect the latest checkpoint under a root" "checkpoint $ck"
grep -qE "^  step +3$" "$LOG" || fail "inspect: no 'step 3' line"
grep -qF "gpt: vocab 256, context 32, 1 layers, 2 heads, d_model 32" "$LOG" || fail "inspect: no model line"
grep -qF "data 1 x pipeline 1 x sequence 1 x tensor 1 (1d) = 1 rank; zero stage 0; precision f32" "$LOG" ||
  fail "inspect: no layout line"
count=0 bytes=0
opt_count=$(headers "$ck/optimizer.safetensors" | wc -l)
for f in model optimizer; do
  while read -r name dtype shape nbytes _; do
    count=$((count + 1)) bytes=$((bytes + nbytes)) shape="[${shape//,/, }]"
    line=$(grep -E "^  $name " "$LOG" | head -1)
    [[ "$line" == *" $dtype "*"$shape"*" $nbytes  ok "* ]] || fail "inspect: row of $name is '$line', expected $dtype $shape $nbytes ok"
  done < <(headers "$ck/$f.safetensors")
done
grep -qF "total: $count tensors, $bytes bytes of tensor data" "$LOG" && echo "ok: $count tensors, $bytes bytes, as the headers say" ||
  fail "inspect: totals differ from the headers' $count tensors, $bytes bytes"
grep -qF "checksums: $count of $count verified, 0 problem(s)" "$LOG" || fail "inspect: not every checksum verified"

# `checkpoint export --format hf`: a Hugging Face GPT-2 directory. Its headers hold GPT-2's names
# and Conv1D layout (c_attn (C, 3C)), no tied lm_head; config.json has GPT2Config's fields.
run 60 "$tessera" checkpoint export "$work/ck" "$work/hf" --format hf
expect_ok "export to Hugging Face" "exported $ck (step 3) to $work/hf"
hf_rows=$(headers "$work/hf/model.safetensors")
if grep -qE "^transformer\.h\.0\.attn\.c_attn\.weight F32 32,96 " <<<"$hf_rows" &&
   grep -qE "^transformer\.wte\.weight F32 256,32 " <<<"$hf_rows" &&
   ! grep -q "lm_head" <<<"$hf_rows" &&
   [ "$(wc -l <<<"$hf_rows")" -eq "$(( $(headers "$ck/model.safetensors" | wc -l) - 1 ))" ]; then
  echo "ok: the export holds GPT-2's names and layout"
else fail "export: unexpected tensors: $hf_rows"; fi
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert (c['model_type'], c['n_layer'], c['n_head'], c['n_embd'], c['vocab_size'], c['n_positions']) == ('gpt2', 1, 2, 32, 256, 32), c" \
  "$work/hf/config.json" >"$LOG" 2>&1 && echo "ok: config.json is GPT2Config's" || fail "export: config.json: $(cat "$LOG")"
# The exported directory read back with --hf scores and generates as the checkpoint does.
for i in $(seq 40); do echo "the old dogs read books. the cat sees mice."; done >"$work/text.txt"
run 60 "$tessera" data prepare --input "$work/text.txt" --output "$work/text.tok" --tokenizer byte --quiet
expect_ok "prepare a token file" ""
for from in "--checkpoint $work/ck" "--hf $work/hf"; do
  # shellcheck disable=SC2086  # the flag and its directory
  run 60 "$tessera" eval $from --data "$work/text.tok"
  expect_ok "eval $from" "perplexity"
  grep -o "loss [0-9.]* | perplexity [0-9.]*" "$LOG" >"$work/eval-${from%% *}.txt"
  # shellcheck disable=SC2086
  run 60 "$tessera" generate $from --prompt "the cat" --max-new-tokens 24 --temperature 0
  expect_ok "generate $from" ""
  cp "$LOG" "$work/gen-${from%% *}.txt"
done
if [ -s "$work/eval---hf.txt" ] && cmp -s "$work/eval---checkpoint.txt" "$work/eval---hf.txt"; then
  echo "ok: eval --hf of the export equals the checkpoint's: $(cat "$work/eval---hf.txt")"
else fail "eval --hf '$(cat "$work/eval---hf.txt")' vs '$(cat "$work/eval---checkpoint.txt")'"; fi
cmp -s "$work/gen---checkpoint.txt" "$work/gen---hf.txt" && echo "ok: generate --hf equals the checkpoint's" ||
  fail "generate --hf differs: $(cat "$work/gen---hf.txt") vs $(cat "$work/gen---checkpoint.txt")"
run 60 "$tessera" checkpoint export "$work/ck" "$work/hf" --format hf
expect_error "export over an existing directory" "expected a new output directory" 30
run 60 "$tessera" checkpoint export "$work/ck" "$work/hf2" --format onnx
expect_error "export to an unknown format" "expected --format hf, got 'onnx'" 30

# A 2-rank ZeRO-1 run: the layout it was written under (parallel.data left to the job: the
# checkpoint records its world size).
mpi 2 180 "$tessera" train "${common[@]}" --set zero.stage=1 --set checkpoint.dir="$work/ck_zero"
expect_ok "2-rank ZeRO-1 run" "checkpoint saved"
run 60 "$tessera" checkpoint inspect "$work/ck_zero/step-00000003"
expect_ok "inspect a ZeRO-1 checkpoint" "data 2 x pipeline 1 x sequence 1 x tensor 1 (1d) = 2 ranks; zero stage 1"
grep -qF "checksums: $count of $count verified" "$LOG" || fail "inspect ZeRO-1: the same $count tensors, verified"

# A truncated model file: every tensor whose bytes it lost is named, with the file.
cp -r "$ck" "$work/cut"
size=$(stat -c %s "$work/cut/model.safetensors")
cut_at=$((size - 40000))  # past the last tensor (32 KiB) into the one before
truncate -s "$cut_at" "$work/cut/model.safetensors"
run 60 "$tessera" checkpoint inspect "$work/cut"
expect_error "inspect a truncated file" "model.safetensors: file is $cut_at bytes, the manifest says $size (truncated)"
lost=0
while read -r name _ _ _ _ end; do
  [ "$end" -le "$cut_at" ] && continue
  lost=$((lost + 1))
  grep -qF "$work/cut/model.safetensors: tensor '$name': its bytes" "$LOG" || fail "truncated: '$name' is not reported"
done < <(headers "$ck/model.safetensors")
[ "$lost" -ge 1 ] && [ "$(grep -c "TRUNCATED" "$LOG")" -eq "$lost" ] && echo "ok: the $lost truncated tensor(s) named" ||
  fail "truncated: expected $lost TRUNCATED rows, got $(grep -c TRUNCATED "$LOG")"
grep -qF "optimizer.safetensors: $opt_count tensors" "$LOG" || fail "truncated: the intact optimizer file is not listed"

# One flipped byte inside wte.weight: that tensor fails its checksum, the others pass.
cp -r "$ck" "$work/flip"
read -r start < <(headers "$ck/model.safetensors" | awk '$1 == "wte.weight" {print $5}')
python3 -c "
import sys; p, at = sys.argv[1], int(sys.argv[2]) + 100
b = bytearray(open(p, 'rb').read()); b[at] ^= 0x10; open(p, 'wb').write(b)" "$work/flip/model.safetensors" "$start"
run 60 "$tessera" checkpoint inspect "$work/flip"
expect_error "inspect a corrupt tensor" "$work/flip/model.safetensors: tensor 'wte.weight': checksum "
grep -qF "(the data is corrupt)" "$LOG" || fail "corrupt: the message does not say corrupt"
[ "$(grep -c ' CORRUPT$' "$LOG")" -eq 1 ] && grep -qF "$((count - 1)) of $count verified, 1 problem(s)" "$LOG" &&
  echo "ok: only wte.weight fails" || fail "corrupt: expected exactly one CORRUPT row"

# A missing optimizer file; a directory that is no checkpoint.
cp -r "$ck" "$work/noopt"
rm "$work/noopt/optimizer.safetensors"
run 60 "$tessera" checkpoint inspect "$work/noopt"
expect_error "inspect without optimizer.safetensors" "noopt/optimizer.safetensors: file is missing (the manifest lists $opt_count tensors in it)"
run 60 "$tessera" checkpoint inspect "$work"
expect_error "inspect a directory that holds no checkpoint" "found neither"
run 60 "$tessera" checkpoint inspect
expect_error "inspect without DIR" "expected a checkpoint DIR"
run 60 "$tessera" checkpoint nosuch
expect_error "unknown checkpoint subcommand" "expected the subcommand 'inspect', 'export' or 'consolidate', got 'nosuch'"

finish
