#!/usr/bin/env bash
# Runs the data-parallel checks (equivalence with one process, accumulation, overlap, byte counts,
# unused parameters, errors) under mpirun on 1, 2 and 4 ranks, each with a hard time limit.
# Usage: ddp_test.sh DDP_RANKS
# (tests/parallel/mpi_test_lib.sh is private to its package, so the few lines it would give are here.)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bazel's TEST_TMPDIR is too long for the unix sockets Open MPI puts in its session directory.
export TMPDIR=$(mktemp -d /tmp/tessera-ddp.XXXXXX)
trap 'rm -rf "$TMPDIR"' EXIT
export HOME=${HOME:-$TMPDIR}
ddp_ranks=$1
log=$TMPDIR/run.log
failures=0
for n in 1 2 4; do
  start=$(date +%s)
  timeout --kill-after=5 240 mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    -np "$n" "$ddp_ranks" </dev/null >"$log" 2>&1
  rc=$?
  elapsed=$(($(date +%s) - start))
  pattern="ddp: all checks passed on $n ranks"
  if [ "$rc" -ne 0 ] || ! grep -qF -- "$pattern" "$log"; then
    echo "FAIL: $n ranks exited with $rc after ${elapsed}s; output:"
    cat "$log"
    failures=$((failures + 1))
  else
    echo "ok: $n ranks in ${elapsed}s"
    sed 's/^/    /' "$log"
  fi
done
if [ "$failures" -ne 0 ]; then
  echo "$failures run(s) failed"
  exit 1
fi
echo "all passed"
