#!/usr/bin/env bash
# `tessera bench` hands over to the bench binary built beside it: --help lists kernels, train and
# comm; `bench train` runs gpt-tiny; `mpirun -np 2 tessera bench comm` runs at tiny sizes with
# rank 0 printing both tables; then tp, zero and pp under mpirun at tiny sizes.
# Usage: bench_cli_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")

run 30 "$tessera" --help
expect_ok "tessera --help lists bench" "bench kernels|train|comm"

run 30 "$tessera" bench --help
expect_ok "bench --help" "usage: bench [kernels | gemm | train | comm | cuda | adam]"
for sub in kernels gemm train comm cuda; do
  grep -qE "^  $sub " "$LOG" && echo "ok: bench --help lists $sub" || fail "bench --help lacks $sub"
done

run 120 "$tessera" bench train --model gpt-tiny --shapes 2x16 --warmup 1 --steps 1 --no-peer
expect_ok "tessera bench train" "| gpt-tiny | 2 x 16 |"

mpi 2 240 "$tessera" bench comm --max-bytes 4K --model gpt-tiny --batch 1 --seq 16 --steps 1
expect_ok "mpirun -np 2 tessera bench comm" "## Data-parallel gpt-tiny training step"
[ "$(grep -c "^# tessera bench comm: 2 ranks" "$LOG")" -eq 1 ] && echo "ok: rank 0 alone prints" ||
  fail "expected one header line from rank 0"
[ "$(grep -cE "^\| (all_reduce|all_gather|reduce_scatter|broadcast|all_to_all) +\| +(1|4) KB" "$LOG")" -eq 10 ] &&
  echo "ok: 10 collective rows" || fail "expected 10 collective rows (5 collectives x 1 KB, 4 KB)"

run 30 "$tessera" bench frobnicate
expect_error "unknown bench subcommand" "expected the subcommand kernels, train, comm or cuda"

# `mpirun -np 2 tessera bench tp` at tiny sizes: both sections, the 1D rows' bytes equal to the
# prediction and to the documentation's formula (on 2 ranks the ring factor 2(P-1)/P is 1: the
# block's 4 all-reduces of A = 1 x 16 x 64 x 4 bytes send 16384), the grid schemes listed with why
# they do not fit 2 ranks.
run 30 "$tessera" bench tp --help
expect_ok "bench tp --help" "usage: mpirun -np N bench tp"
run 30 "$tessera" bench --help
grep -qE "^  tp " "$LOG" && echo "ok: bench --help lists tp" || fail "bench --help lacks tp"
mpi 2 240 "$tessera" bench tp --batch 1 --seq 16 --d-model 64 --heads 4 --model gpt-tiny --repeats 1
expect_ok "mpirun -np 2 tessera bench tp" "## GPT training step, gpt-tiny"
[ "$(grep -c "^# tessera bench tp: 2 ranks" "$LOG")" -eq 1 ] && echo "ok: bench tp, rank 0 alone prints" ||
  fail "expected one bench tp header line from rank 0"
grep -qE "^\| 1d +\| P=2 +\|[^|]*\|[^|]*\| 2\+2 all_reduce +\| +16384 \| +16384 \| +1\.00 \| +16384 \|" "$LOG" &&
  echo "ok: bench tp block row, measured = formula" || fail "expected the 1d block row with 16384 bytes"
[ "$(grep -cE "^- 1d prediction:.*: equal\.$" "$LOG")" -eq 2 ] && echo "ok: bench tp bytes = prediction" ||
  fail "expected the measured bytes to equal the 1D prediction in both sections"
# On 2 ranks no grid scheme has a layout (2 is not q^2, d q^2 or q^3).
[ "$(grep -cE "^\| (2d|2\.5d|3d) +\| 2 is not [^|]*\| +- \|" "$LOG")" -eq 6 ] &&
  echo "ok: bench tp lists 2d, 2.5d, 3d" || fail "expected 6 no-layout rows (3 schemes x 2 sections)"
mpi 2 60 "$tessera" bench tp --d-model 64 --heads 3
expect_error "bench tp usage error" "expected --d-model divisible by --heads"
# The grid schemes on 4 ranks (2d and 2.5d at q 2 d 1) and 8 (2.5d q 2 d 2, 3d q 2), gpt-tiny on
# B=4, T=8: every measured row of both sections equals its prediction (calls, payload and bytes
# sent), and the GPT step's rows equal the edges + blocks worked out by hand in
# tests/models/plan/tp_volume_test.cc (sent/rank = predicted = 1493444, 1820902, 584708 bytes); 3D's loss
# statistics on the LM head's own plane group (288 bytes) are named apart.
tp_tiny="--batch 4 --seq 8 --d-model 32 --heads 4 --model gpt-tiny --repeats 1"
gpt_rows() { sed -n '/^## GPT training step/,$p' "$LOG"; }
mpi 4 240 "$tessera" bench tp $tp_tiny
expect_ok "mpirun -np 4 tessera bench tp" "## GPT training step, gpt-tiny"
[ "$(grep -cE "^- (1d|2d|2\.5d) prediction: .*: equal\.$" "$LOG")" -eq 6 ] &&
  echo "ok: bench tp 4 ranks, 1d, 2d, 2.5d = prediction in both sections" ||
  fail "expected 6 equal predictions (1d, 2d, 2.5d x 2 sections) on 4 ranks"
[ "$(gpt_rows | grep -cE "^\| (2d +\| q=2|2\.5d +\| q=2 d=1) +\|[^|]*\|[^|]*\|[^|]*\| +1493444 \| +1493444 \|")" -eq 2 ] &&
  echo "ok: bench tp GPT step 2d, 2.5d d=1: sent 1493444 = predicted" ||
  fail "expected the 2d and 2.5d GPT step rows with 1493444 bytes sent and predicted"
mpi 8 300 "$tessera" bench tp $tp_tiny
expect_ok "mpirun -np 8 tessera bench tp" "## GPT training step, gpt-tiny"
[ "$(gpt_rows | grep -cE "^- (1d|2\.5d|3d) prediction: .*: equal\.$")" -eq 3 ] &&
  echo "ok: bench tp 8 ranks, GPT step 1d, 2.5d, 3d = prediction" ||
  fail "expected 3 equal GPT step predictions (1d, 2.5d, 3d) on 8 ranks"
gpt_rows | grep -qE "^\| 2\.5d +\| q=2 d=2 +\|[^|]*\|[^|]*\|[^|]*\| +1820902 \| +1820902 \|" &&
  echo "ok: bench tp GPT step 2.5d d=2: sent 1820902 = predicted" ||
  fail "expected the 2.5d (q=2 d=2) GPT step row with 1820902 bytes sent and predicted"
gpt_rows | grep -qE "^\| 3d +\| q=2 +\|[^|]*\|[^|]*\|[^|]*\| +584708 \| +584708 \|" &&
  echo "ok: bench tp GPT step 3d: sent 584708 = predicted" ||
  fail "expected the 3d GPT step row with 584708 bytes sent and predicted"
gpt_rows | grep -qE "^- 3d besides: 2 calls, 192 payload bytes, 288 bytes sent per rank" &&
  echo "ok: bench tp 3d names the plane group's 288 bytes" ||
  fail "expected the 3d note on the loss's plane statistics (288 bytes)"
grep -qE "^- (2d|2\.5d|3d) prediction.*(not modelled|MISMATCH)" "$LOG" &&
  fail "expected no grid prediction to be incomplete or to mismatch" ||
  echo "ok: bench tp no grid prediction incomplete"

# `mpirun -np 2 tessera bench zero` on gpt-tiny: stages 0-3 measured in f32 and bf16; f32 stage 0's
# parameters and AdamW state on their formula terms (4 and 8 bytes per parameter), f32 stage 3's
# on 16 Psi / N (2, 2 and 4 bytes per parameter on 2 ranks), stage 0 and 2 sending exactly data
# parallelism's 2 Psi ring volume; where stage 3's model state lives with offload and offload_params;
# the largest model under a device limit with and without offload.
run 30 "$tessera" bench zero --help
expect_ok "bench zero --help" "usage: mpirun -np N bench zero"
run 30 "$tessera" bench --help
grep -qE "^  zero " "$LOG" && echo "ok: bench --help lists zero" || fail "bench --help lacks zero"
mpi 2 240 "$tessera" bench zero --model gpt-tiny --batch 1 --seq 16 --repeats 1
expect_ok "mpirun -np 2 tessera bench zero" "## ZeRO model state per rank, GPT gpt-tiny"
[ "$(grep -c "^# tessera bench zero: 2 ranks" "$LOG")" -eq 1 ] && echo "ok: bench zero, rank 0 alone prints" ||
  fail "expected one bench zero header line from rank 0"
[ "$(grep -cE "^\| (f32|bf16) +\| [0123] +\| +2 \| +[0-9.]+ \([0-9.]+\) \|.*\| +[0-9]+ \| +[0-9]+ \| +[0-9.]+ \|$" "$LOG")" -eq 8 ] &&
  echo "ok: bench zero, 8 measured rows" || fail "expected 8 measured rows (f32, bf16 x stages 0-3)"
grep -qE "^\| f32 +\| 3 +\| +2 \| +2\.00 \(2\.00\) \| +2\.00 \(2\.00\) \| +4\.00 \(4\.00\) \|.*\| +1\.0[0-4][0-9] \| " "$LOG" &&
  echo "ok: bench zero, f32 stage 3 terms = formula" || fail "expected f32 stage 3's 2, 2, 4 bytes per parameter, within 5% of 16 Psi / N"
grep -qE "^\| f32 +\| 0 +\| +2 \| +4\.00 \(4\.00\) \| +4\.00 \(4\.00\) \| +8\.00 \(8\.00\) \|" "$LOG" &&
  echo "ok: bench zero, f32 stage 0 terms = formula" || fail "expected f32 stage 0's 4, 4, 8 bytes per parameter"
[ "$(grep -cE "^\| (f32|bf16) +\| [02] +\| .*\| +1\.000 \|$" "$LOG")" -eq 4 ] &&
  echo "ok: bench zero, stages 0 and 2 send the 2 Psi ring" || fail "expected stages 0 and 2 at 1.000 of the ring"
# Heterogeneous memory: f32 stage 3's 12 / N bytes per parameter on the device; offload leaves the
# compute shard's 4 / N there and puts 12 / N on the host; offload_params leaves the device none.
grep -qE "^\| stage 3 +\| +2 \| +6\.00 \| +0\.00 \|" "$LOG" &&
  grep -qE "^\| stage 3 \+ offload +\| +2 \| +2\.00 \| +6\.00 \|" "$LOG" &&
  grep -qE "^\| stage 3 \+ offload \+ offload_params +\| +2 \| +0\.0[0-9]* \| +8\.00 \|" "$LOG" &&
  echo "ok: bench zero, model state moves to the host with offload and offload_params" ||
  fail "expected device / host bytes per parameter 6 / 0, 2 / 6 and ~0 / 8 for stage 3, offload, offload_params"
grep -qE "^\| stage 3 \+ offload \+ overlap_step, 2 MiB buckets +\| +2 \| +2\.00 \| +6\.00 \|" "$LOG" &&
  echo "ok: bench zero, the overlapped step's row" ||
  fail "expected the overlapped offload step's row with offload's 2 / 6 bytes per parameter"
# The largest GPT under a device limit: each size is built by the sharded build and trained;
# offload and offload_params fit more layers than stage 3, every fitting size's peak is under the
# limit and the next one's above it, and no build held the whole model (offloaded: under a quarter
# of it, the masters being on the host).
mpi 2 240 "$tessera" bench zero --model gpt-tiny --batch 1 --seq 16 --device-limit 6M \
  --max-layers 16 --threads 1
expect_ok "bench zero --device-limit" "## The largest GPT under a device limit of 6.00 MB"
if python3 - "$LOG" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"\| (stage 3[^|]*?) +\| +2 \| +(\d+) \| +[0-9.]+ \| +([0-9.]+) \| +([0-9.]+) \| +([0-9.]+) \| +(\d+), ([0-9.]+) \| +the device limit \|", line)
    if m:
        rows[m.group(1)] = (int(m.group(2)), float(m.group(5)), int(m.group(6)), float(m.group(7)),
                            float(m.group(3)), float(m.group(4)))
plain, off = rows.get("stage 3"), rows.get("stage 3 + offload + offload_params")
ok = plain and off and 1 <= plain[0] < off[0] and all(
    r[1] <= 6.0 < r[3] and r[2] == r[0] + 1 for r in (plain, off)) and (
    plain[5] < plain[4] and off[5] < off[4] / 4)
print(rows)
sys.exit(0 if ok else 1)
PY
then echo "ok: bench zero --device-limit: offload fits more layers, each search ends at the limit, no build holds the whole model"
else fail "bench zero --device-limit: expected both rows, offload above stage 3, peaks at the limit, builds below the whole model"; fi
mpi 2 60 "$tessera" bench zero --precision f16
expect_error "bench zero usage error" "expected --precision f32, bf16 or both"

# `mpirun -np 2 tessera bench pp` at the smallest sizes: the table's header and one measured row
# per schedule, 1f1b's with its step ratio to itself and the theory's (P-1)/(M+P-1) = 1/5; a
# --stages other than the ranks refused.
run 30 "$tessera" bench pp --help
expect_ok "bench pp --help" "usage: mpirun -np P bench pp"
run 30 "$tessera" bench --help
grep -qE "^  pp " "$LOG" && echo "ok: bench --help lists pp" || fail "bench --help lacks pp"
mpi 2 60 "$tessera" bench pp --blocks 4 --width 32 --heads 2 --seq 8 --micro 1 --micro-batches 4 \
  --warmup 1 --steps 1
expect_ok "mpirun -np 2 tessera bench pp" "## Pipeline schedules, GPT (4 blocks, C=32"
[ "$(grep -c "^# tessera bench pp: 2 ranks" "$LOG")" -eq 1 ] && echo "ok: bench pp, rank 0 alone prints" ||
  fail "expected one bench pp header line from rank 0"
grep -qE "^\| schedule +\| +v \| +M \| step \(ms\) \| vs 1f1b \| bubble mean \| bubble max \| theory \| simulated \|" "$LOG" &&
  echo "ok: bench pp table header" || fail "expected the bench pp table header"
grep -qE "^\| 1f1b +\| +1 \| +4 \| +[0-9.]+ \| +1\.00 \| +[0-9.]+ \| +[0-9.]+ \| +0\.200 \| +[0-9.]+ \|" "$LOG" &&
  echo "ok: bench pp 1f1b row" || fail "expected the 1f1b row (vs 1f1b 1.00, theory 0.200)"
[ "$(grep -cE "^\| (gpipe|1f1b|interleaved|zero_bubble) +\| +[12] \| +4 \| +[0-9.]+ \|" "$LOG")" -eq 4 ] &&
  echo "ok: bench pp, 4 measured rows" || fail "expected 4 measured rows (one per schedule)"
mpi 2 60 "$tessera" bench pp --stages 4
expect_error "bench pp layout error" "expected --stages 4 to equal the number of ranks 2"

# `mpirun -np 2 tessera bench sp` at the smallest sizes: the memory table's rows for each length,
# every layout's activations positive and sequence parallelism's below one rank's; the budget
# search finds a longer sequence for ring_flash over 2 ranks than for one rank; errors.
run 30 "$tessera" bench sp --help
expect_ok "bench sp --help" "usage: mpirun -np N bench sp"
run 30 "$tessera" bench --help
grep -qE "^  sp " "$LOG" && echo "ok: bench --help lists sp" || fail "bench --help lacks sp"
mpi 2 60 "$tessera" bench sp --blocks 1 --width 32 --heads 2 --vocab 64 --seqs 32,64 --budget 1 \
  --start-seq 32 --max-seq 1024 --refine 1
expect_ok "mpirun -np 2 tessera bench sp" "## Activation memory per rank against the sequence length, N=2"
[ "$(grep -cE "^\| +(32|64) \|( +[0-9.]+ \([0-9.]+\) \|){5}$" "$LOG")" -eq 2 ] &&
  echo "ok: bench sp, two memory rows of five layouts" || fail "expected rows T=32 and 64 of five layouts"
awk -F'|' '$2 ~ /^ +64 $/ { split($3, one, " "); split($6, sp, " "); exit !(sp[1] > 0 && sp[1] < one[1]) }' \
  "$LOG" && echo "ok: bench sp, ring_flash below one rank at T=64" || fail "expected sp ring_flash < one rank at T=64"
awk -F'|' '$2 ~ /one rank/ { one = $3 + 0 } $2 ~ /sp ring_flash x2/ { sp = $3 + 0 }
  END { exit !(one > 0 && sp > one) }' "$LOG" &&
  echo "ok: bench sp, ring_flash's longest sequence beyond one rank's" ||
  fail "expected a longer sequence for sp ring_flash x2 than one rank"
mpi 2 60 "$tessera" bench sp --heads 3 --width 96
expect_error "bench sp layout error" "expected --heads 3 and --vocab 256 divisible by the 2 ranks"
run 30 "$tessera" bench sp --modes zigzag
expect_error "bench sp usage error" "expected --modes to list ring, all_to_all or ring_flash, got 'zigzag'"

finish
