#!/usr/bin/env bash
# `tessera plan`: a config's layout predicted (table and --json with the keys others script
# against), --search ranked with the refusals in train's words and the best written as a config
# that `tessera train` runs unchanged, the predicted peak against the allocator's on every rank for
# a few layouts, and "parallel": "auto" training to the serial run's losses.
# Usage: plan_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
two_layers=(--set model.n_layers=2 --set model.n_heads=4)

run 60 "$tessera" plan --config "$cfg" --world 2 "${two_layers[@]}"
expect_ok "the config's layout on 2 ranks" "parts of rank 0's peak"
run 60 "$tessera" plan --config "$cfg" --world 2 --json "${two_layers[@]}"
if python3 - "$LOG" >"$work/json.log" 2>&1 <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for key in ["layout", "feasible", "why", "step_seconds", "tokens_per_second", "mfu", "peak_bytes",
            "peak_rank", "peak_bytes_ranks", "comm_bytes_per_rank", "bubble"]:
    assert key in p, key
assert p["feasible"] and p["why"] is None, p["why"]
assert len(p["peak_bytes_ranks"]) == 2 and p["peak_bytes"] == max(p["peak_bytes_ranks"])
assert p["layout"]["parallel"]["data"] == 2 and "stage" in p["layout"]["zero"]
assert p["step_seconds"] > 0 and 0 < p["mfu"] < 1
PY
then echo "ok: --json has the documented keys"; else fail "--json: $(cat "$work/json.log")"; fi

run 120 "$tessera" plan --config "$cfg" --world 4 --search --top 5 --write-config "$work/best.json" \
  "${two_layers[@]}"
expect_ok "search over 4 ranks" "wrote the best layout to"
grep -q "refused:" "$LOG" && echo "ok: refusals listed" || fail "search lists no refusals"
grep -qF "x [config] parallel." "$LOG" && echo "ok: refusals in train's words" ||
  fail "refusals lack train's wording"
mpi 4 300 "$tessera" train --config "$work/best.json" --set train.steps=3 --set train.sample_tokens=0
expect_ok "the written config trains on 4 ranks" "step 3/3"

# The predicted peak of every rank against the allocator's (the metrics' peak_bytes_ranks).
check_peak() {  # check_peak NAME NP TOL KEY=VALUE...
  local name=$1 np=$2 tol=$3
  shift 3
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  mpi "$np" 300 "$tessera" train --config "$cfg" "${two_layers[@]}" "${sets[@]}" \
    --set train.steps=4 --set train.sample_tokens=0 --set train.eval_every=0 \
    --set logging.log_every=1 --set logging.metrics="$work/$name.jsonl"
  [ "$RC" -eq 0 ] || { fail "$name: train exit $RC"; return; }
  run 60 "$tessera" plan --config "$cfg" --world "$np" --json "${two_layers[@]}" "${sets[@]}"
  cp "$LOG" "$work/$name.plan.json"
  if python3 - "$work/$name.jsonl" "$work/$name.plan.json" "$tol" >"$LOG" 2>&1 <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
measured = [r for r in records if "peak_bytes_ranks" in r][-1]["peak_bytes_ranks"]
predicted = json.load(open(sys.argv[2]))["peak_bytes_ranks"]
tol = float(sys.argv[3])
errors = [p / m - 1 for p, m in zip(predicted, measured)]
print("per rank error " + " ".join(f"{100 * e:+.1f}%" for e in errors))
assert len(predicted) == len(measured) and all(abs(e) <= tol for e in errors), (predicted, measured)
PY
  then echo "ok: $name peak: $(cat "$LOG")"; else fail "$name peak: $(cat "$LOG")"; fi
}
# The issue's bar: 3% on every rank (README "Planning a layout" lists the layouts not there yet).
check_peak dp2 2 0.03
check_peak pp2 2 0.03 parallel.pipeline=2
check_peak accumulation 2 0.03 train.micro_batch_size=2
check_peak tp2 2 0.03 parallel.tensor.size=2
check_peak zero2 2 0.03 zero.stage=2
check_peak zero3 2 0.03 zero.stage=3
check_peak zero1 2 0.03 zero.stage=1
check_peak tp4_2d 4 0.03 parallel.tensor.size=4 parallel.tensor.mode=2d
check_peak bf16 2 0.03 precision.dtype=bf16
check_peak pp2_1f1b_4mb 2 0.03 parallel.pipeline=2 train.micro_batch_size=2

# "parallel": "auto": the planner's layout for 2 ranks trains to the serial run's losses.
common=(--config "$cfg" --set train.steps=6 --set train.sample_tokens=0 --set logging.log_every=1)
mpi 1 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/serial.jsonl"
expect_ok "serial" "step 6/6"
mpi 2 300 "$tessera" train "${common[@]}" --set parallel=auto --set logging.metrics="$work/auto.jsonl"
expect_ok "parallel auto on 2 ranks" "planned against measured"
grep -qF "layout (parallel: auto, cluster host)" "$LOG" && echo "ok: auto's layout in the header" ||
  fail "auto's header line missing"
compare "serial vs auto" "$work/serial.jsonl" "$work/auto.jsonl" 1e-4

mpi 1 60 "$tessera" train "${common[@]}" --set parallel=fast
expect_error "parallel neither an object nor auto" 'expected an object or the string "auto"'
run 60 "$tessera" plan --config "$cfg" --world 0
expect_error "world 0" "expected --world N with N >= 1"
finish
