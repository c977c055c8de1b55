#!/usr/bin/env bash
# train.profile: steps 2-3 of a tiny GPT are recorded; rank 0 prints the time per family (kernels,
# backward nodes, the step's phases), each rank writes a Chrome trace that parses as JSON and holds
# those events (one file per rank under mpirun); impossible step ranges are refused.
# Usage: profile_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=4 --set train.sample_tokens=0)

check_trace() {  # check_trace NAME FILE RANK
  if python3 - "$2" "$3" <<'PY' >"$LOG" 2>&1; then
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in events if e["ph"] == "X"]
assert x and all(e["pid"] == int(sys.argv[2]) for e in x), "pid"
names = {(e["cat"], e["name"]) for e in x}
for want in [("step", "train_step"), ("step", "backward"), ("step", "optimizer"),
             ("kernel", "matmul"), ("backward", "LinearBackward")]:
    assert want in names, f"missing {want}"
steps = [e for e in x if e["name"] == "train_step"]
assert len(steps) == 2, f"{len(steps)} train_step events, expected 2 (steps 2 and 3)"
print(f"{len(x)} events, 2 steps")
PY
    echo "ok: $1: $(cat "$LOG")"
  else
    fail "$1: $(cat "$LOG")"
  fi
}

run 120 "$tessera" train "${common[@]}" --set "train.profile={\"steps\": [2, 3], \"path\": \"$work/one/trace.json\"}"
expect_ok "profiled run" "profile of steps 2-3 on rank 0"
for row in "kernel    matmul" "backward  LinearBackward" "step      optimizer"; do
  grep -qF -- "$row" "$LOG" && echo "ok: the table has '$row'" || fail "the table lacks '$row'"
done
check_trace "one-process trace" "$work/one/trace.json" 0

mpi 2 120 "$tessera" train "${common[@]}" --set "train.profile={\"steps\": [2, 3], \"path\": \"$work/two/trace.json\"}"
expect_ok "profiled run on 2 ranks" "profile of steps 2-3 on rank 0"
check_trace "rank 0's trace" "$work/two/trace.rank0.json" 0
check_trace "rank 1's trace" "$work/two/trace.rank1.json" 1
if grep -q "\"cat\":\"comm\",\"name\":\"wait all_reduce\"" "$work/two/trace.rank0.json"; then
  echo "ok: rank 0's trace holds the data-parallel all-reduce"
else
  fail "rank 0's trace has no collective"
fi

run 60 "$tessera" train "${common[@]}" --set 'train.profile={"steps": [3, 2]}'
expect_error "steps out of order" "train.profile.steps: expected 1 <= first <= last <= train.steps 4, got [3, 2]"
run 60 "$tessera" train "${common[@]}" --set 'train.profile={"steps": [2, 9]}'
expect_error "steps beyond the run" "got [2, 9]"
run 60 "$tessera" train "${common[@]}" --set 'train.profile={"steps": 2}'
expect_error "steps not a pair" "train.profile.steps: expected [first, last]"
run 60 "$tessera" train "${common[@]}" --set 'train.profile={"steps": [1, 2], "every": 3}'
expect_error "unknown profile key" "unknown key 'train.profile.every'"
finish
