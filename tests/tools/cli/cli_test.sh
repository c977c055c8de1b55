#!/usr/bin/env bash
# `tessera` in one process: usage and configuration errors, a short run with a checkpoint, then
# `data prepare`, `eval` and `generate` on that checkpoint, and a corrupt checkpoint.
# Usage: cli_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"

run 30 "$tessera"
[ "$RC" -eq 2 ] && grep -qF "usage: tessera <command>" "$LOG" && echo "ok: usage" || fail "usage (exit $RC)"

printf '{\n  "model": {"type": "gpt"},\n  "train": {"steps": 3,}\n}\n' >"$work/bad.json"
run 60 "$tessera" train --config "$work/bad.json"
expect_error "malformed JSON" "bad.json: invalid JSON: parse error at line 3"

run 60 "$tessera" train --config "$cfg" --set train.stpes=3
expect_error "unknown key" "unknown key 'train.stpes' (train takes: steps,"

run 60 "$tessera" train --config "$cfg" --set optimizer.lr=fast
expect_error "bad value" "optimizer"

run 60 "$tessera" train --config "$work/none.json"
expect_error "missing config" "none.json: cannot open the file"

run 60 "$tessera" train --config "$cfg" --set data.path="$work/missing.tok"
expect_error "missing data file" "missing.tok"

run 60 "$tessera" train --config "$cfg" --set parallel.tensor.size=8 --set parallel.tensor.mode=2.5d \
  --set parallel.tensor.depth=2
expect_error "2.5d tensor parallel on one process" \
  "the world's 1 ranks do not divide into pipeline x sequence x tensor = 8"

run 60 "$tessera" train
expect_error "no --config" "expected --config FILE"

run 300 "$tessera" train --config "$cfg" --set checkpoint.dir="$work/ck" --set logging.metrics="$work/m.jsonl"
expect_ok "short run" "sample (temperature"
grep -qF "step 10/10 | loss" "$LOG" || fail "short run: no progress line for step 10"
grep -qF "eval at step 10 | val loss" "$LOG" || fail "short run: no evaluation"
[ -f "$work/ck/step-00000010/model.safetensors" ] || fail "short run: no checkpoint"
[ "$(grep -c '"step"' "$work/m.jsonl")" -eq 11 ] || fail "metrics: expected 10 step records + 1 eval"

head -c 20000 /dev/urandom | tr -dc 'a-z .' | head -c 3000 >"$work/text.txt"
run 60 "$tessera" data prepare --input "$work/text.txt" --output "$work/text.tok" --tokenizer byte --quiet
expect_ok "data prepare" ""
[ -f "$work/text.tok" ] || fail "data prepare wrote no token file"

run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok"
expect_ok "eval" "| loss "
grep -qE "perplexity [0-9]+\.[0-9]+" "$LOG" || fail "eval: no perplexity"

run 120 "$tessera" generate --checkpoint "$work/ck" --prompt "the cat" --max-new-tokens 30 --temperature 0
expect_ok "generate" "the cat"
first=$(cat "$LOG")
run 120 "$tessera" generate --checkpoint "$work/ck/step-00000010" --prompt "the cat" --max-new-tokens 30 --temperature 0
[ "$first" = "$(cat "$LOG")" ] && echo "ok: greedy generation repeats" || fail "greedy generation differs"
[ "$(head -c 7 "$LOG")" = "the cat" ] || fail "generate: output does not start with the prompt"

run 120 "$tessera" generate --checkpoint "$work/ck" --prompt "the" --max-new-tokens 20 --temperature 0.8 --top-k 5 --seed 3
expect_ok "generate with sampling" "the"

# train.device / --device: a clear error without a GPU; with one, the same commands run there.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
run 60 "$tessera" train --config "$cfg" --set train.device=gpu
expect_error "bad train.device" 'train.device: expected "cpu", "cuda" or "cuda:N", got "gpu"'
run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --device tpu
expect_error "bad --device" '[eval] --device: expected "cpu", "cuda" or "cuda:N", got "tpu"'
if [ "$gpus" -eq 0 ]; then
  run 60 "$tessera" train --config "$cfg" --set train.device=cuda
  expect_error "train.device cuda without a GPU" "[config] train.device cuda: no " 30
  run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --device cuda
  expect_error "eval --device cuda without a GPU" "tessera eval: [eval] --device cuda: no " 30
  run 60 "$tessera" generate --checkpoint "$work/ck" --device cuda:0
  expect_error "generate --device cuda:0 without a GPU" "[generate] --device cuda:0: no " 30
else
  run 300 "$tessera" train --config "$cfg" --set train.device=cuda --set checkpoint.dir="$work/ck_gpu"
  expect_ok "train on cuda" "sample (temperature"
  grep -qF "| device cuda:0" "$LOG" || fail "train on cuda: the header does not name cuda:0"
  grep -qE "step 10/10 \| loss .* \| mem cuda:0 .* \(peak " "$LOG" || fail "train on cuda: no GPU memory"
  run 120 "$tessera" eval --checkpoint "$work/ck_gpu" --data "$work/text.tok" --device cuda
  expect_ok "eval --device cuda" "| loss "
  run 120 "$tessera" generate --checkpoint "$work/ck_gpu" --prompt "the cat" --max-new-tokens 30 --temperature 0 --device cuda
  expect_ok "generate --device cuda" "the cat"
  run 60 "$tessera" generate --checkpoint "$work/ck_gpu" --device "cuda:$gpus"
  expect_error "generate on a GPU that is not there" "[generate] --device cuda:$gpus: expected a device index below $gpus"
fi

run 60 "$tessera" eval --checkpoint "$work/nothing" --data "$work/text.tok"
expect_error "eval of a missing checkpoint" "nothing: no such directory"

# eval and generate never read the optimizer state: a checkpoint without it serves them.
cp -r "$work/ck" "$work/ck_weights"
rm "$work/ck_weights/step-00000010/optimizer.safetensors"
run 120 "$tessera" eval --checkpoint "$work/ck_weights" --data "$work/text.tok"
expect_ok "eval without optimizer.safetensors" "| loss "
run 120 "$tessera" generate --checkpoint "$work/ck_weights" --prompt "the" --max-new-tokens 5
expect_ok "generate without optimizer.safetensors" "the"

# Ctrl-C / SIGTERM: the first signal finishes the step, saves and exits non-zero saying so; a
# second signal exits at once (a wider model, so the second signal lands inside a step).
long=(--config "$cfg" --set train.steps=100000 --set logging.log_every=1 --set train.sample_tokens=0
      --set model.d_model=256 --set model.n_layers=4 --set model.n_heads=4)
for signals in "INT" "INT TERM"; do
  dir="$work/sig_${signals// /_}"
  TESSERA_PROGRESS=lines "$tessera" train "${long[@]}" --set checkpoint.dir="$dir" >"$LOG" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q "step  *2/" "$LOG" && break; sleep 0.1; done
  for s in $signals; do kill -s "$s" "$pid"; done
  wait "$pid"
  RC=$?
  if [ "$signals" = "INT" ]; then
    [ "$RC" -ne 0 ] && grep -qF "stopped by SIGINT (Ctrl-C) after step" "$LOG" &&
      grep -qF "checkpoint saved" "$LOG" && ls "$dir" | grep -q '^step-' &&
      echo "ok: SIGINT saves a checkpoint and exits $RC" || fail "SIGINT: exit $RC"
  else
    # 128 + the second signal's number: delivered together, either may come second.
    { [ "$RC" -eq 130 ] || [ "$RC" -eq 143 ]; } && grep -qF "second signal, exiting now" "$LOG" &&
      echo "ok: a second signal exits at once ($RC)" || fail "second signal: exit $RC"
  fi
done

printf 'garbage!' | dd of="$work/ck/step-00000010/model.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok"
expect_error "eval of a corrupt checkpoint" "model.safetensors"
run 60 "$tessera" train --config "$cfg" --set checkpoint.dir="$work/ck" --set train.steps=12
expect_error "resume from a corrupt checkpoint" "model.safetensors"

finish
