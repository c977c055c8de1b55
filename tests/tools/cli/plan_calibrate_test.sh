#!/usr/bin/env bash
# `tessera plan calibrate`: --help, bad arguments refused, and --quick runs that write a strict
# host profile: alone (no collectives) and under `mpirun -np 2` (every collective fitted at 2
# ranks, rank 0 alone printing), atomically into a directory it creates.
# Usage: plan_calibrate_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")

run 30 "$tessera" plan calibrate --help
expect_ok "plan calibrate --help" "usage: [mpirun -np N] tessera plan calibrate"

run 60 "$tessera" plan calibrate --frobnicate
expect_error "plan calibrate refuses an unknown argument" "unknown argument '--frobnicate'"
run 60 "$tessera" plan calibrate --threads 0 --out "$TMPDIR/never.json"
expect_error "plan calibrate refuses --threads 0" "expected --threads in [1, 4096], got 0"

# check_profile FILE RANKS: the profile's structure, with python3 (standard library only).
check_profile() {
  python3 - "$1" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
errors = []
def need(cond, what):
    if not cond: errors.append(what)
need(p["name"] == "host", "name is host")
need(p["cores"] >= 1, "cores >= 1")
for d in ("f32", "bf16", "f16"):
    need(p["peak_flops"][d] > 1e9, f"peak_flops.{d} > 1 GFLOP/s")
need(p["memory_bandwidth"] > 1e8, "memory_bandwidth > 0.1 GB/s")
curve = p["gemm_efficiency"]
need(len(curve) >= 2, "two GEMM points or more")
need(all(a[0] < b[0] for a, b in zip(curve, curve[1:])), "GEMM points in increasing FLOPs")
need(all(0 < e <= 1 for _, e in curve), "GEMM efficiencies in (0, 1]")
for key in ("attention_efficiency", "elementwise_efficiency"):
    need(0 < p[key] <= 1, f"{key} in (0, 1]")
need(p["launch_overhead_s"] > 0, "launch_overhead_s > 0")
need(p["host_adam_params_per_s"] > 0, "host_adam_params_per_s > 0")
need(p["intra_node"]["bandwidth"] > 0, "intra_node.bandwidth > 0")
names = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
         "send_recv"]
if ranks == 1:
    need(p["measured"] == {}, "nothing measured on one rank")
else:
    for n in names:
        link = p["measured"].get(n, {}).get("2")
        need(link is not None and link["bandwidth"] > 0 and link["latency_s"] >= 0,
             f"measured.{n}.2 fitted")
for field in ("peak_flops.f32", "gemm_efficiency", "memory_bandwidth", "measured", "inter_node"):
    need(any(k == field or k.startswith(field + ".") for k in p["sources"]), f"a source for {field}")
if errors:
    print("profile check failed: " + "; ".join(errors))
    sys.exit(1)
print(f"{len(curve)} GEMM points, {sum(len(v) for v in p['measured'].values())} collective fits")
PY
}

run 120 "$tessera" plan calibrate --quick --out "$TMPDIR/one/host.json"
expect_ok "plan calibrate --quick on one rank" "one rank: no collectives measured"
if out=$(check_profile "$TMPDIR/one/host.json" 1 2>&1); then echo "ok: one-rank profile: $out"
else fail "one-rank profile: $out"; fi

mpi 2 180 "$tessera" plan calibrate --quick --out "$TMPDIR/two/host.json"
expect_ok "mpirun -np 2 plan calibrate --quick" "wrote $TMPDIR/two/host.json"
[ "$(grep -c "^# tessera plan calibrate:" "$LOG")" -eq 1 ] && echo "ok: rank 0 alone prints" ||
  fail "expected one summary header, from rank 0"
grep -qE "^\| all_reduce +\| +2 \|" "$LOG" && echo "ok: the collectives table" ||
  fail "expected an all_reduce row for 2 ranks"
if out=$(check_profile "$TMPDIR/two/host.json" 2 2>&1); then echo "ok: two-rank profile: $out"
else fail "two-rank profile: $out"; fi
leftovers=$(ls "$TMPDIR/two" | grep -v '^host.json$' || true)
[ -z "$leftovers" ] && echo "ok: no temporary file left" || fail "left behind: $leftovers"

# TESSERA_HOST_PROFILE names the default output.
TESSERA_HOST_PROFILE="$TMPDIR/env/profile.json" run 120 "$tessera" plan calibrate --quick
expect_ok "plan calibrate writes \$TESSERA_HOST_PROFILE" "wrote $TMPDIR/env/profile.json"
[ -s "$TMPDIR/env/profile.json" ] && echo "ok: the profile exists" || fail "no profile written"

finish
