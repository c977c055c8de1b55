#!/usr/bin/env bash
# `tessera` refusing mistakes with messages that say what to change, and showing what it is doing:
# `data prepare` onto its own input, one-process errors without Open MPI's abort banner (alone and
# under mpirun -np 1), bad --max-batches and TESSERA_NUM_THREADS, a directory as --config, warmup
# longer than training, `data --help`, eval progress and the notice before building a big model.
# Usage: cli_messages_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"

# expect_no WHAT TEXT: the last run's output lacks TEXT.
expect_no() {
  if grep -qF -- "$2" "$LOG"; then fail "$1: output has '$2'"; else echo "ok: $1 (no '$2')"; fi
}

# --- data prepare must not overwrite its input (directly, through a symlink or a hard link).
head -c 100000 /dev/urandom | tr -dc 'a-z .' | head -c 3000 >"$work/text.txt"
cp "$work/text.txt" "$work/text.orig"
ln -s "$work/text.txt" "$work/link.txt"
ln "$work/text.txt" "$work/hard.txt"
for out in "$work/text.txt" "$work/link.txt" "$work/hard.txt" "$work/../work/text.txt"; do
  run 60 "$tessera" data prepare --input "$work/text.txt" --output "$out" --tokenizer byte --quiet
  expect_error "data prepare onto its input as $(basename "$out")" "(the same file)"
  cmp -s "$work/text.txt" "$work/text.orig" || fail "data prepare changed its input via $out"
done
[ -L "$work/link.txt" ] || fail "data prepare replaced the symlink"
ls "$work" | grep -q 'tmp' && fail "data prepare left a temporary file: $(ls "$work")"
run 60 "$tessera" data prepare --input "$work/text.txt" --output "$work/text.tok" --tokenizer byte --quiet
expect_ok "data prepare to another file" "wrote $work/text.tok"

# --- `data --help` and `data prepare --help`.
run 30 "$tessera" data --help
expect_ok "data --help" "usage: tessera data <subcommand>"
grep -qF "prepare --input" "$LOG" || fail "data --help does not list prepare"
run 30 "$tessera" data prepare --help
expect_ok "data prepare --help" "usage: prepare --input"
run 30 "$tessera" data frobnicate
expect_error "data with an unknown subcommand" "expected the subcommand 'prepare', got 'frobnicate'"
[ "$RC" -eq 2 ] || fail "data frobnicate: expected exit 2, got $RC"

# --- one-process errors: the message and a non-zero exit, without Open MPI's MPI_ABORT banner.
printf '{"model": {"type": "gpt"}, "train": {"steps": 3,}}\n' >"$work/bad.json"
run 60 "$tessera" train --config "$work/bad.json"
expect_error "bad config, one process" "bad.json: invalid JSON"
expect_no "bad config, one process" "MPI_ABORT"
expect_no "bad config, one process" "ORTE_ERROR_LOG"
[ "$(grep -c . "$LOG")" -eq 1 ] || fail "bad config, one process: expected the message alone"
mpi 1 60 "$tessera" train --config "$work/bad.json"
expect_error "bad config, mpirun -np 1" "bad.json: invalid JSON"
expect_no "bad config, mpirun -np 1" "MPI_ABORT"
expect_no "bad config, mpirun -np 1" "ORTE_ERROR_LOG"
mpi 1 60 "$tessera" train --config "$cfg" --set train.stpes=3
expect_error "unknown key, mpirun -np 1" "unknown key 'train.stpes'"
expect_no "unknown key, mpirun -np 1" "MPI_ABORT"

# --- a directory as --config, warmup not ending before training does.
run 60 "$tessera" train --config "$work"
expect_error "directory as --config" "$work: is a directory, expected a JSON configuration file"
expect_no "directory as --config" "invalid JSON"
run 60 "$tessera" train --config "$cfg" --set schedule.type=cosine --set schedule.warmup_steps=20
expect_error "warmup longer than training" \
  "train.steps (10) must be greater than schedule.warmup_steps (20) for a cosine schedule"
grep -qF "set train.steps to more than 20 or schedule.warmup_steps to less than 10" "$LOG" ||
  fail "warmup longer than training: the message does not say what to set"

# --- TESSERA_NUM_THREADS must be a positive integer.
for bad in abc 0 -3; do
  TESSERA_NUM_THREADS=$bad run 60 "$tessera" eval --checkpoint "$work/none" --data "$work/text.tok"
  expect_error "TESSERA_NUM_THREADS=$bad" "TESSERA_NUM_THREADS: expected a positive integer"
  grep -qF "got '$bad'" "$LOG" || fail "TESSERA_NUM_THREADS=$bad: the value is not named"
done
TESSERA_NUM_THREADS=abc run 60 "$tessera" train --config "$cfg"
expect_error "TESSERA_NUM_THREADS=abc for train" "TESSERA_NUM_THREADS: expected a positive integer"

# --- a short run to evaluate; a tiny model is built without a notice.
run 300 "$tessera" train --config "$cfg" --set checkpoint.dir="$work/ck"
expect_ok "short run" "sample (temperature"
expect_no "tiny model" "building "

# --- --max-batches must be >= 1.
for bad in -1 0; do
  run 60 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --max-batches "$bad"
  expect_error "--max-batches $bad" "--max-batches: expected a number of batches >= 1"
done
run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --max-batches 2 --batch-size 1
expect_ok "--max-batches 2" "64 tokens in windows of 32"

# --- eval progress: none for a pass of a moment, every batch count when asked for.
run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --batch-size 1
expect_ok "short eval" "| loss "
expect_no "short eval" " batches | "
windows=$(( $(grep -oE '[0-9]+ tokens in windows of 32' "$LOG" | cut -d' ' -f1) / 32 ))
TESSERA_PROGRESS=lines run 120 "$tessera" eval --checkpoint "$work/ck" --data "$work/text.tok" --batch-size 1
expect_ok "eval with TESSERA_PROGRESS=lines" "| loss "
grep -qE "^eval 1/$windows batches \| .* tok/s \| ETA " "$LOG" || fail "eval progress: no first line"
grep -qE "^eval $windows/$windows batches \| " "$LOG" || fail "eval progress: no final line"

# --- a big model says what it builds before building it (stopped as soon as it says so).
cat >"$work/big.json" <<'EOF'
{"model": {"type": "gpt", "preset": "gpt2-350m"}, "train": {"steps": 1, "batch_size": 1, "seq_len": 16},
 "data": {"builtin_tokens": 65536, "builtin_val_tokens": 4096}}
EOF
"$tessera" train --config "$work/big.json" </dev/null >"$LOG" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -qF "building " "$LOG" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if grep -qF "building gpt2-350m (355M parameters)..." "$LOG"; then
  echo "ok: big model notice: $(grep -F building "$LOG")"
else
  fail "big model: no 'building gpt2-350m (355M parameters)...' notice"
fi

finish
