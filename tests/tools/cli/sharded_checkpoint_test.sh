#!/bin/bash
# Sharded checkpoints (checkpoint.format sharded) resharded across layouts: two chains of runs, each
# resuming the previous run's checkpoint under another layout and saving its own two steps later,
# so every layout's checkpoint is resumed under two others (chain A's successor and chain B's):
#   A: serial -> tp 2 1d -> tp 4 2d -> pp 2 -> ZeRO-3 dp 4 -> dp 2 x pp 2 x tp 2 -> serial
#   B: serial -> ZeRO-3 dp 4 -> tp 2 1d -> dp 2 x pp 2 x tp 2 -> pp 2 -> tp 4 2d -> serial
#   C: serial -> tp 8 2.5d -> tp 8 3d -> sp 2 x dp 2 x ZeRO-1 -> serial
# Every run's losses equal the uninterrupted serial run's at its steps within 1e-4 relative
# (optimizer state, masters, data position included); a serial checkpoint resumed serially is
# bit-identical. Then: inspect, consolidate, eval of a sharded checkpoint, and a damaged piece.
# Usage: sharded_checkpoint_test.sh TESSERA
set -u
tessera=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
source "$here/cli_test_lib.sh"
work=$TMPDIR/work
mkdir -p "$work"

# 2 blocks (two stages), 4 heads (tp 4 2d), batch 8 in micro-batches of 2; no dropout.
common=(--config "$here/tiny_gpt.json" --set model.n_layers=2 --set model.n_heads=4
        --set train.batch_size=8 --set train.micro_batch_size=2 --set train.eval_every=0
        --set train.sample_tokens=0 --set logging.log_every=1 --set checkpoint.format=sharded)

# layout NAME: RANKS and ARGS of a layout.
layout() {
  case $1 in
    serial) RANKS=1 ARGS=() ;;
    tp2) RANKS=2 ARGS=(--set parallel.tensor.size=2) ;;
    tp4-2d) RANKS=4 ARGS=(--set parallel.tensor.size=4 --set parallel.tensor.mode=2d) ;;
    pp2) RANKS=2 ARGS=(--set parallel.pipeline.size=2) ;;
    z3-dp4) RANKS=4 ARGS=(--set zero.stage=3) ;;
    dp2-pp2-tp2) RANKS=8 ARGS=(--set parallel.pipeline.size=2 --set parallel.tensor.size=2) ;;
    # 2.5D cuts the micro-batch over depth x q = 4.
    tp8-2.5d) RANKS=8 ARGS=(--set parallel.tensor.size=8 --set parallel.tensor.mode=2.5d
                            --set parallel.tensor.depth=2 --set train.micro_batch_size=4) ;;
    tp8-3d) RANKS=8 ARGS=(--set parallel.tensor.size=8 --set parallel.tensor.mode=3d) ;;
    sp2-dp2-z1) RANKS=4 ARGS=(--set parallel.sequence.size=2 --set zero.stage=1) ;;
  esac
}

# The reference's records of the steps in $2, for compare.
steps_of() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
steps = {json.loads(l)["step"] for l in open(sys.argv[2]) if not json.loads(l).get("eval")}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if not r.get("eval") and r["step"] in steps:
        print(line, end="")
EOF
}

mpi 1 60 "$tessera" train "${common[@]}" --set train.steps=14 --set logging.metrics="$work/ref.jsonl"
expect_ok "uninterrupted serial run" "step 14/14"

mpi 1 60 "$tessera" train "${common[@]}" --set train.steps=2 --set checkpoint.dir="$work/A"
expect_ok "serial writes a sharded checkpoint" "checkpoint saved"
cp -r "$work/A" "$work/B"
cp -r "$work/A" "$work/C"
cp -r "$work/A" "$work/same"

# chain NAME LAYOUT...: run k resumes the chain's latest checkpoint under LAYOUT k for two steps.
chain() {
  local name=$1 step=2 prev=serial l
  shift
  for l in "$@"; do
    layout "$l"
    step=$((step + 2))
    local metrics="$work/$name-$l-$step.jsonl"
    mpi "$RANKS" 120 "$tessera" train "${common[@]}" "${ARGS[@]}" --set train.steps=$step \
      --set checkpoint.dir="$work/$name" --set logging.metrics="$metrics"
    expect_ok "$name: $l ($RANKS ranks) resumes $prev's checkpoint" "resumed from"
    steps_of "$work/ref.jsonl" "$metrics" >"$work/ref-$step.jsonl"
    compare "$name: $prev's checkpoint under $l, steps $((step - 1))-$step vs serial" \
      "$work/ref-$step.jsonl" "$metrics" 1e-4
    prev=$l
  done
}
chain A tp2 tp4-2d pp2 z3-dp4 dp2-pp2-tp2 serial
chain B z3-dp4 tp2 dp2-pp2-tp2 pp2 tp4-2d serial
# More layouts: 2.5D (its depth copies written once), 3D, sequence x data x ZeRO-1.
chain C tp8-2.5d tp8-3d sp2-dp2-z1 serial

# Same layout: bit-identical.
mpi 1 60 "$tessera" train "${common[@]}" --set train.steps=4 --set checkpoint.dir="$work/same" \
  --set logging.metrics="$work/same.jsonl"
steps_of "$work/ref.jsonl" "$work/same.jsonl" >"$work/ref-same.jsonl"
compare "serial sharded checkpoint resumed serially: bit-identical" "$work/ref-same.jsonl" \
  "$work/same.jsonl" 0
# ZeRO-3 dp 4 (flat-range pieces, each rank reading only its ranges): an uninterrupted run from
# pp 2's step-8 checkpoint to step 12 (saving at 10), then steps 11-12 again from its own step 10.
mkdir -p "$work/z3" && cp -r "$work/A/step-00000008" "$work/z3/"
layout z3-dp4
mpi 4 60 "$tessera" train "${common[@]}" "${ARGS[@]}" --set train.steps=12 --set checkpoint.every=2 \
  --set checkpoint.dir="$work/z3" --set logging.metrics="$work/z3-whole.jsonl"
expect_ok "z3-dp4 from pp2's checkpoint to step 12" "step 12/12"
rm -rf "$work/z3/step-00000012"
mpi 4 60 "$tessera" train "${common[@]}" "${ARGS[@]}" --set train.steps=12 \
  --set checkpoint.dir="$work/z3" --set logging.metrics="$work/z3-again.jsonl"
steps_of "$work/z3-whole.jsonl" "$work/z3-again.jsonl" >"$work/z3-ref.jsonl"
compare "z3-dp4 sharded checkpoint resumed under z3-dp4: bit-identical" "$work/z3-ref.jsonl" \
  "$work/z3-again.jsonl" 0
# ZeRO-2 over the data group of tp 2 x dp 2 (flat ranges of tensor shards) from the same step 8.
mkdir -p "$work/z2" && cp -r "$work/A/step-00000008" "$work/z2/"
mpi 4 60 "$tessera" train "${common[@]}" --set parallel.tensor.size=2 --set zero.stage=2 \
  --set train.steps=10 --set checkpoint.dir="$work/z2" --set logging.metrics="$work/z2.jsonl"
expect_ok "tp2 x dp2 ZeRO-2 resumes pp2's checkpoint" "resumed from"
steps_of "$work/ref.jsonl" "$work/z2.jsonl" >"$work/ref-z2.jsonl"
compare "pp2's checkpoint under tp2 x dp2 ZeRO-2, steps 9-10 vs serial" "$work/ref-z2.jsonl" \
  "$work/z2.jsonl" 1e-4
mpi 2 60 "$tessera" train "${common[@]}" --set train.steps=12 --set checkpoint.dir="$work/z2" \
  --set logging.metrics="$work/z2-dp2.jsonl"
steps_of "$work/ref.jsonl" "$work/z2-dp2.jsonl" >"$work/ref-z2-dp2.jsonl"
compare "tp2 x dp2 ZeRO-2's checkpoint under dp 2, steps 11-12 vs serial" "$work/ref-z2-dp2.jsonl" \
  "$work/z2-dp2.jsonl" 1e-4

# The hybrid's checkpoint (chain B, step 8): 8 ranks' pieces, inspected, consolidated, evaluated.
ck="$work/B/step-00000008"
run 30 "$tessera" checkpoint inspect "$ck"
expect_ok "inspect a sharded checkpoint" "checksums verified"
grep -q "data 2 x pipeline 2 (1f1b) x sequence 1 x tensor 2 (1d) = 8 ranks" "$LOG" ||
  fail "inspect names the layout written under: $(grep layout "$LOG")"
# Data rank 0's four ranks write; their replicas write nothing.
grep -q "4 piece files" "$LOG" || fail "inspect lists the 4 writing ranks' piece files"
run 30 "$tessera" checkpoint consolidate "$ck" "$work/full.safetensors" --optimizer
expect_ok "consolidate" "wrote"
cat >"$work/check_full.py" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
assert header["wte.weight"]["shape"] == [256, 32], header["wte.weight"]
assert header["h.1.attn.c_attn.weight"]["shape"] in ([32, 96], [96, 32]), header["h.1.attn.c_attn.weight"]
assert "optim/exp_avg/h.0.mlp.c_fc.weight" in header
print(f"consolidated: {len(header) - 1} tensors with their global shapes, optimizer state by name")
PY
if python3 "$work/check_full.py" "$work/full.safetensors" >"$LOG" 2>&1; then echo "ok: $(cat "$LOG")"
else fail "the consolidated file"; fi
run 60 "$tessera" generate --checkpoint "$ck" --max-new-tokens 8 --prompt "the "
expect_ok "generate reads a sharded checkpoint" "the "
run 60 "$tessera" checkpoint export "$ck" "$work/hf" --format hf
expect_ok "export --format hf reads a sharded checkpoint" "$work/hf"

# Damage: a truncated piece file is refused naming the tensor, the piece and the file.
victim=$(ls "$ck"/pieces-*.safetensors | tail -1)
truncate -s -7 "$victim"
run 30 "$tessera" checkpoint inspect "$ck"
expect_error "inspect a truncated piece" "$(basename "$victim"): the file is"
mpi 2 60 "$tessera" train "${common[@]}" --set parallel.tensor.size=2 --set train.steps=10 \
  --set checkpoint.dir="$work/B" --set checkpoint.resume_step=8
expect_error "resume a truncated piece" "truncated"
grep -q "tensor '" "$LOG" && grep -q "piece " "$LOG" ||
  fail "the resume error names the tensor and the piece: $(grep truncated "$LOG" | head -1)"

finish
