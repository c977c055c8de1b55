#!/usr/bin/env bash
# `mpirun -np N tessera train`: 2 data-parallel ranks give the losses of 1 rank with the same
# global batch (with and without gradient accumulation), rank 0 alone prints progress, and a
# mistake every rank makes is reported once, with every rank exiting non-zero and nothing hanging.
# Every metrics record carries each world rank's peak bytes (peak_bytes_ranks, element 0 rank 0's
# peak_bytes), on 1 rank, 2 data ranks and pp 2 x dp 2 (whose stages hold different parts).
# Usage: data_parallel_test.sh TESSERA
set -u
here=$(dirname "$0")
source "$here/cli_test_lib.sh"
tessera=$(realpath "$1")
cfg=$here/tiny_gpt.json
work=$TMPDIR/work
mkdir -p "$work"
common=(--config "$cfg" --set train.steps=8 --set train.sample_tokens=0 --set logging.log_every=1)

mpi 1 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/one.jsonl"
expect_ok "1 rank, micro-batch 8" "step 8/8"
mpi 1 300 "$tessera" train "${common[@]}" --set train.micro_batch_size=4 --set logging.metrics="$work/accum.jsonl"
expect_ok "1 rank, 2 micro-batches of 4" "micro-batch 4 per rank x 2 accumulation"
mpi 2 300 "$tessera" train "${common[@]}" --set logging.metrics="$work/two.jsonl"
expect_ok "2 ranks, micro-batch 4 each" "ranks: 2 (data parallel 2)"
[ "$(grep -c 'step 8/8' "$LOG")" -eq 1 ] && echo "ok: only rank 0 prints progress" || fail "progress printed $(grep -c 'step 8/8' "$LOG") times"

# peaks NAME FILE N [differ]: every record of FILE has N positive peak_bytes_ranks, the first equal
# to peak_bytes; with "differ", some rank's peak differs from rank 0's.
peaks() {
  if python3 - "$2" "$3" "${4:-}" >"$LOG" 2>&1 <<'PY'
import json, sys
path, n, differ = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "differ"
records = [r for r in map(json.loads, open(path)) if not r.get("eval")]  # step records
assert len(records) == 8, f"expected 8 step records, got {len(records)}"
for r in records:
    ranks = r["peak_bytes_ranks"]
    assert len(ranks) == n, f"step {r['step']}: {len(ranks)} entries, expected {n}"
    assert all(isinstance(b, int) and b > 0 for b in ranks), f"step {r['step']}: {ranks}"
    assert ranks[0] == r["peak_bytes"], f"step {r['step']}: {ranks[0]} != peak_bytes {r['peak_bytes']}"
if differ:
    assert any(b != records[-1]["peak_bytes"] for b in records[-1]["peak_bytes_ranks"]), records[-1]
print(f"{n} ranks' peaks, last step {records[-1]['peak_bytes_ranks']}")
PY
  then echo "ok: $1: $(cat "$LOG")"; else fail "$1: $(cat "$LOG")"; fi
}
peaks "peak_bytes_ranks on 1 rank" "$work/one.jsonl" 1
peaks "peak_bytes_ranks on 2 data ranks" "$work/two.jsonl" 2
mpi 4 300 "$tessera" train "${common[@]}" --set model.n_layers=2 --set parallel.pipeline.size=2 \
  --set logging.metrics="$work/pp2dp2.jsonl"
expect_ok "pp 2 x dp 2: the end-of-run summary names the largest peak's rank" "(the largest of 4 ranks)"
peaks "peak_bytes_ranks on pp 2 x dp 2" "$work/pp2dp2.jsonl" 4 differ

for other in accum two; do
  if python3 "$here/compare_losses.py" "$work/one.jsonl" "$work/$other.jsonl" 1e-5 >"$LOG" 2>&1; then
    echo "ok: 1 rank vs $other: $(cat "$LOG")"
  else
    fail "1 rank vs $other: losses differ"
  fi
done

mpi 2 60 "$tessera" train --config "$cfg" --set train.stpes=3
expect_error "unknown key on 2 ranks" "unknown key 'train.stpes'" 30
n=$(grep -c "unknown key 'train.stpes'" "$LOG")
[ "$n" -eq 1 ] && echo "ok: the error is printed once" || fail "the error is printed $n times"

# train.device cuda: every rank finds no GPU and one error is printed; with 2 GPUs or more, 2 ranks
# reduce their gradients over NCCL and follow the CPU's single-rank losses.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -eq 0 ]; then
  mpi 2 60 "$tessera" train --config "$cfg" --set train.device=cuda
  expect_error "train.device cuda on 2 ranks without a GPU" "[config] train.device cuda: no " 30
  n=$(grep -c "train.device cuda: no " "$LOG")
  [ "$n" -eq 1 ] && echo "ok: the no-GPU error is printed once" || fail "the no-GPU error is printed $n times"
elif [ "$gpus" -ge 2 ]; then
  mpi 2 300 "$tessera" train "${common[@]}" --set train.device=cuda --set logging.metrics="$work/gpu2.jsonl"
  expect_ok "2 ranks on 2 GPUs (NCCL)" "ranks: 2 (data parallel 2)"
  if python3 "$here/compare_losses.py" "$work/one.jsonl" "$work/gpu2.jsonl" 1e-3 >"$LOG" 2>&1; then
    echo "ok: 1 CPU rank vs 2 GPU ranks: $(cat "$LOG")"
  else
    fail "1 CPU rank vs 2 GPU ranks: losses differ"
  fi
else
  echo "skipped: data parallelism on CUDA needs 2 GPUs, found $gpus"
fi

mpi 2 60 "$tessera" train --config "$cfg" --set parallel.data=3
expect_error "impossible layout" "= 3 ranks, but the job has 2" 30

finish
