#!/usr/bin/env bash
# llm.c's and nanoGPT's token files through the CLI (data.format llmc / u16, eval --data-format):
# the same ids written in each format train a tiny GPT to the very same losses and evaluate to the
# same loss as our format; the llmc magic is detected by eval; bad files and keys are refused
# naming the file or the key.
# Usage: token_formats_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"

head -c 40000 /dev/urandom | tr -dc 'a-z .' | head -c 6000 >"$work/text.txt"
run 60 "$tessera" data prepare --input "$work/text.txt" --output "$work/ours.tok" --tokenizer byte --quiet
expect_ok "data prepare" ""

# The same ids as llm.c writes them (256 int32 header: magic, version, count) and as nanoGPT does
# (raw u16), from our file's payload (64-byte header, u16 ids for a byte vocabulary).
python3 - "$work" <<'EOF'
import struct, sys
work = sys.argv[1]
data = open(f"{work}/ours.tok", "rb").read()
assert data[:8] == b"TSRATOK1" and struct.unpack_from("<I", data, 12)[0] == 2
count = struct.unpack_from("<Q", data, 16)[0]
ids = data[64:]
assert len(ids) == 2 * count
header = struct.pack("<3i", 20240520, 1, count) + b"\0" * (1024 - 12)
open(f"{work}/train.bin", "wb").write(header + ids)
open(f"{work}/train_u16.bin", "wb").write(ids)
open(f"{work}/truncated.bin", "wb").write(header + ids[:-3])
EOF

common=(--config "$cfg" --set train.steps=4 --set train.sample_tokens=0 --set logging.log_every=1)
run 120 "$tessera" train "${common[@]}" --set data.path="$work/ours.tok" \
  --set logging.metrics="$work/ours.jsonl" --set checkpoint.dir="$work/ck"
expect_ok "train from our token file" "step 4/4"
run 120 "$tessera" train "${common[@]}" --set data.path="$work/train.bin" --set data.format=llmc \
  --set logging.metrics="$work/llmc.jsonl"
expect_ok "train from an llm.c file" "step 4/4"
run 120 "$tessera" train "${common[@]}" --set data.path="$work/train_u16.bin" --set data.format=u16 \
  --set data.vocab_size=256 --set logging.metrics="$work/u16.jsonl"
expect_ok "train from a nanoGPT u16 file" "step 4/4"
for other in llmc u16; do
  if python3 "$here/compare_losses.py" "$work/ours.jsonl" "$work/$other.jsonl" 0 >"$LOG" 2>&1; then
    echo "ok: $other file gives our format's losses exactly: $(cat "$LOG")"
  else
    fail "$other file: losses differ from our format's"
  fi
done

# BERT: [MASK] is the first id past the data's vocabulary, so data.vocab_size 256 matches our
# file's; by default an llmc file's vocabulary is model.vocab_size - 1 (260 - 1).
bert=(--config "$here/../../../tools/configs/bert-tiny.json" --set train.steps=2 --set schedule.type=constant
      --set train.eval_batches=1 --set logging.log_every=1 --set checkpoint.dir= --set logging.metrics=)
run 120 "$tessera" train "${bert[@]}" --set data.path="$work/ours.tok" --set logging.metrics="$work/bert_ours.jsonl"
expect_ok "BERT from our token file" "[MASK] = id 256"
run 120 "$tessera" train "${bert[@]}" --set data.path="$work/train.bin" --set data.format=llmc \
  --set data.vocab_size=256 --set logging.metrics="$work/bert_llmc.jsonl"
expect_ok "BERT from an llm.c file, data.vocab_size 256" "[MASK] = id 256"
if python3 "$here/compare_losses.py" "$work/bert_ours.jsonl" "$work/bert_llmc.jsonl" 0 >"$LOG" 2>&1; then
  echo "ok: BERT from the llmc file gives our format's losses exactly: $(cat "$LOG")"
else
  fail "BERT llmc file: losses differ from our format's"
fi
run 120 "$tessera" train "${bert[@]}" --set data.path="$work/train.bin" --set data.format=llmc
expect_ok "BERT from an llm.c file, default vocabulary" "[MASK] = id 259"

# eval: the llmc magic is detected; u16 has no header and needs the flag.
loss_of() { grep -oE "\| loss [0-9.]+" "$LOG"; }
run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/ours.tok" --batch-size 4
expect_ok "eval of our file" "| loss "
want=$(loss_of)
run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/train.bin" --batch-size 4
expect_ok "eval of an llm.c file (detected)" "| loss "
[ "$(loss_of)" = "$want" ] && echo "ok: llmc eval equals ours ($want)" || fail "llmc eval: $(loss_of), ours: $want"
run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/train_u16.bin" --data-format u16 --batch-size 4
expect_ok "eval of a u16 file" "| loss "
[ "$(loss_of)" = "$want" ] && echo "ok: u16 eval equals ours ($want)" || fail "u16 eval: $(loss_of), ours: $want"
run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/train_u16.bin"
expect_error "eval of a u16 file without --data-format" "pass --data-format u16" 30
run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/train.bin" --data-format npy
expect_error "eval with an unknown --data-format" "--data-format: expected one of tessera" 30
run 60 "$tessera" eval --help
expect_ok "eval --help names the formats" "detected from the file's magic"

# Bad files and keys.
run 60 "$tessera" train "${common[@]}" --set data.path="$work/truncated.bin" --set data.format=llmc
expect_error "truncated llm.c file" "truncated.bin' to hold " 30
grep -qF "the file is truncated" "$LOG" || fail "truncated llm.c file: the message does not say truncated"
run 60 "$tessera" train "${common[@]}" --set data.path="$work/ours.tok" --set data.format=llmc
expect_error "our file read as llmc" "ours.tok', got 1095914324: this is a Tessera token file" 30
run 60 "$tessera" train "${common[@]}" --set data.path="$work/train.bin" --set data.format=llmc \
  --set data.vocab_size=100
expect_error "ids past data.vocab_size" "expected ids below the vocab size 100 in '$work/train.bin'" 30
run 60 "$tessera" train "${common[@]}" --set data.path="$work/train.bin" --set data.format=npy
expect_error "unknown data.format" "data.format: expected one of tessera, llmc, u16, got 'npy'" 30
run 60 "$tessera" train "${common[@]}" --set data.path="$work/ours.tok" --set data.vocab_size=256
expect_error "data.vocab_size with our format" "data.vocab_size: only data.format llmc or u16" 30
run 60 "$tessera" train "${common[@]}" --set data.format=u16
expect_error "data.format without data.path" "data.format u16: expected token files in data.path" 30

finish
