#!/usr/bin/env bash
# `tessera plan validate` on 2 ranks: 3 of the planner's layouts of a tiny GPT trained 5 steps each
# for real. The table and the summary print and every run succeeds; --json holds every run's
# prediction and measurement (a median step time, every rank's peak) and the summary's fields
# (errors, Kendall tau, the chosen layout's regret); mistakes are refused by name.
# Usage: plan_validate_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
validate=("$tessera" plan validate --config "$cfg" --world 2 --layouts 3 --steps 5)

run 600 "${validate[@]}" --out "$work/runs"
expect_ok "plan validate, the table" "Kendall tau-b of"
if ! grep -qF "pred ms" "$LOG" || grep -qF "FAILED" "$LOG" || ! grep -qF "chosen layout (plan #" "$LOG"; then
  fail "the table's header, 3 successful rows and the summary"
elif [ "$(grep -cE '^ +[0-9]+  dp[0-9]' "$LOG")" -ne 3 ]; then
  fail "expected 3 rows, got $(grep -cE '^ +[0-9]+  dp[0-9]' "$LOG")"
else
  echo "ok: 3 layouts ran: $(grep -F 'step time:' "$LOG")"
fi
[ "$(ls "$work/runs"/*.jsonl 2>/dev/null | wc -l)" -eq 3 ] && echo "ok: --out keeps the runs' files" \
  || fail "--out: expected 3 metrics files, got $(ls "$work/runs")"

timeout 600 "${validate[@]}" --json --seed 2 </dev/null >"$work/v.json" 2>"$LOG"
RC=$?
if [ "$RC" -ne 0 ]; then
  fail "plan validate --json: exit $RC"
elif python3 - "$work/v.json" >"$LOG" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["world"] == 2 and d["steps"] == 5, d
runs = d["runs"]
assert len(runs) == 3, len(runs)
assert runs[0]["plan_rank"] == 1, "the planner's best runs first"
for r in runs:
    assert r["ok"] and r["failure"] is None, r
    m, p = r["measured"], r["predicted"]
    assert m["step_seconds"] > 0 and m["steps_used"] == 3, m
    assert len(m["peak_bytes_ranks"]) == 2 and min(m["peak_bytes_ranks"]) > 0, m
    assert m["peak_bytes"] == max(m["peak_bytes_ranks"]), m
    assert p["step_seconds"] > 0 and p["peak_bytes"] > 0, p
    for key in ("step_error_pct", "peak_error_pct", "layout", "layout_text"):
        assert key in r, key
s = d["summary"]
for key in ("step_time_mape_pct", "step_time_worst_ape_pct", "peak_mape_pct",
            "peak_worst_ape_pct", "kendall_tau", "chosen_regret_pct", "chosen_plan_rank",
            "measured_best_plan_rank"):
    assert key in s, key
assert s["succeeded"] == 3 and s["failed"] == 0, s
assert s["step_time_worst_ape_pct"] >= s["step_time_mape_pct"] >= 0, s
assert s["chosen_regret_pct"] >= 0, s
print(f"step MAPE {s['step_time_mape_pct']:.1f}%, peak MAPE {s['peak_mape_pct']:.1f}%, "
      f"tau {s['kendall_tau']}, regret {s['chosen_regret_pct']:.1f}%")
PY
then echo "ok: plan validate --json: $(cat "$LOG")"; else fail "plan validate --json: $(cat "$LOG")"; fi

run 30 "$tessera" plan validate --world 2
expect_error "no --config" "expected --config FILE" 30
run 30 "$tessera" plan validate --config "$cfg" --world 2 --steps 2
expect_error "--steps within the warm-up" "expected --steps above the 2 warm-up steps" 30

finish
