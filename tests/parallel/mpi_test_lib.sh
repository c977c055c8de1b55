# Shared by the multi-rank test scripts: runs a program under mpirun with a hard time limit and
# records its exit code, elapsed seconds and output.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bazel's TEST_TMPDIR is too long for the unix sockets Open MPI puts in its session directory.
export TMPDIR=$(mktemp -d /tmp/tessera-mpi.XXXXXX)
trap 'rm -rf "$TMPDIR"' EXIT
export HOME=${HOME:-$TMPDIR}
LOG=$TMPDIR/run.log
failures=0

# mpi_run N LIMIT_S PROGRAM ARGS...: sets RC, ELAPSED (whole seconds) and the output in $LOG.
mpi_run() {
  local n=$1 limit=$2
  shift 2
  local start=$(date +%s)
  timeout --kill-after=5 "$limit" mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    -np "$n" "$@" </dev/null >"$LOG" 2>&1
  RC=$?
  ELAPSED=$(($(date +%s) - start))
}

fail() {
  echo "FAIL: $*"
  echo "---- output ----"
  cat "$LOG"
  echo "----------------"
  failures=$((failures + 1))
}

# expect_pass N LIMIT_S PATTERN PROGRAM ARGS...: exit 0 and PATTERN in the output.
expect_pass() {
  local n=$1 limit=$2 pattern=$3
  shift 3
  mpi_run "$n" "$limit" "$@"
  if [ "$RC" -ne 0 ]; then
    fail "$* on $n ranks exited with $RC after ${ELAPSED}s"
  elif ! grep -qF -- "$pattern" "$LOG"; then
    fail "$* on $n ranks: output lacks '$pattern'"
  else
    echo "ok: $(basename "$1") ${2:-} on $n ranks in ${ELAPSED}s: $(grep -F -- "$pattern" "$LOG" | head -1)"
  fi
}

# expect_fault N MAX_S PATTERN PROGRAM ARGS...: a non-zero exit within MAX_S seconds (the limit is
# enforced with a margin so a hang is reported, not waited out) and PATTERN in the output.
expect_fault() {
  local n=$1 max_s=$2 pattern=$3
  shift 3
  mpi_run "$n" $((max_s + 20)) "$@"
  if [ "$RC" -eq 0 ]; then
    fail "$* on $n ranks exited 0; expected a failure"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ] || [ "$ELAPSED" -gt "$max_s" ]; then
    fail "$* on $n ranks took ${ELAPSED}s (exit $RC); expected to end within ${max_s}s"
  elif ! grep -qF -- "$pattern" "$LOG"; then
    fail "$* on $n ranks: output lacks '$pattern'"
  else
    echo "ok: $(basename "$1") ${2:-} on $n ranks failed as expected (exit $RC) in ${ELAPSED}s"
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all passed"
}
