#!/bin/bash
# Smoke test for `mpirun -np 2 bench comm` at tiny sizes: rank 0 alone prints; the collectives
# table has a row per collective and size with Tessera's and plain MPI's positive times, their
# ratio, and bandwidths by the nccl-tests definitions; the data-parallel
# table has the 1-rank and 2-rank rows with positive tokens/s and speed-up; bad options fail once.
set -u
bench="$1"
fail() { echo "comm_smoke_test: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bazel's TEST_TMPDIR is too long for the unix sockets Open MPI creates.
export TMPDIR=$(mktemp -d /tmp/tessera-comm.XXXXXX)
trap 'rm -rf "$TMPDIR"' EXIT
mpi() {
  timeout --kill-after=5 240 mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    -np 2 "$bench" comm "$@" </dev/null
}

out="$(mpi --max-bytes 64K --rounds 3 --model gpt-tiny --batch 2 --seq 32 --steps 2 --threads 1 2>&1)"
status=$?
echo "$out"
[ "$status" -eq 0 ] || fail "expected exit status 0, got $status"
[ "$(grep -c "^# tessera bench comm: 2 ranks, .*GEMM ISA .*load average" <<<"$out")" -eq 1 ] ||
  fail "expected one header line with the ISA and the load average (rank 0 prints)"
grep -qE "^\| collective +\| +size \| time \(us\) \| MPI time \(us\) \| ratio \| algbw \(GB/s\) \| busbw \(GB/s\) \| MPI busbw \(GB/s\) \|$" <<<"$out" ||
  fail "expected the collectives table header"
for kind in all_reduce reduce_scatter all_gather broadcast all_to_all send/recv; do
  for size in "1 KB" "4 KB" "16 KB" "64 KB"; do
    row=$(grep -E "^\| $kind +\| +$size +\|" <<<"$out")
    [ "$(wc -l <<<"$row")" -eq 1 ] && [ -n "$row" ] || fail "expected one row for $kind $size"
    # Fields: 4 time, 5 MPI time, 6 ratio, 7 algbw, 8 busbw, 9 MPI busbw.
    awk -F'|' '{ for (i = 4; i <= 9; ++i) if ($i + 0 <= 0) exit 1 }' <<<"$row" ||
      fail "expected positive times, ratio and bandwidths in '$row'"
    awk -F'|' '{ r = $4 / $5; if ($6 < 0.97 * r - 0.005 || $6 > 1.03 * r + 0.005) exit 1 }' <<<"$row" ||
      fail "expected ratio = time / MPI time in '$row'"
    # nccl-tests: busbw = algbw * 2(n-1)/n = algbw for all_reduce on 2 ranks, algbw/2 for the
    # (n-1)/n collectives, algbw for broadcast and send/recv.
    awk -F'|' -v kind="$kind" '{
      f = (kind == "all_reduce" || kind == "broadcast" || kind == "send/recv") ? 1 : 0.5
      if ($8 < 0.98 * f * $7 || $8 > 1.02 * f * $7) exit 1 }' <<<"$row" ||
      fail "expected busbw = algbw x the nccl-tests factor in '$row'"
  done
done
[ "$(grep -cE "^\| (all_reduce|all_gather|reduce_scatter|broadcast|all_to_all|send/recv) " <<<"$out")" -eq 24 ] ||
  fail "expected 24 collective rows (6 kinds x 4 sizes)"
grep -q "^load average after: " <<<"$out" || fail "expected the load average after the table"
grep -q "^## Data-parallel gpt-tiny training step" <<<"$out" || fail "expected the data-parallel title"
grep -qE "^\| ranks \| threads/rank \| global batch \| step \(s\) \| tokens/s \| speedup \|" <<<"$out" ||
  fail "expected the data-parallel table header"
for ranks in 1 2; do
  row=$(grep -E "^\| +$ranks \| +1 \| +$((2 * ranks)) x 32 \|" <<<"$out")
  [ -n "$row" ] || fail "expected the data-parallel row for $ranks rank(s)"
  awk -F'|' '{ for (i = 5; i <= 7; ++i) if ($i + 0 <= 0) exit 1 }' <<<"$row" ||
    fail "expected positive step time, tokens/s and speed-up in '$row'"
done
grep -qE "^\| +1 \| .*\| +1\.00+ \|" <<<"$out" || fail "expected a 1-rank speed-up of 1.00"

out="$(mpi --max-bytes 64Q 2>&1)"
[ $? -ne 0 ] || fail "expected a bad --max-bytes to fail"
[ "$(grep -c "expected --max-bytes to be a size" <<<"$out")" -eq 1 ] ||
  fail "expected the usage error once, got: $out"
echo "comm_smoke_test: OK"
