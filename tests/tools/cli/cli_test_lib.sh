# Shared by the CLI test scripts: runs a command with a time limit, keeps its exit code, elapsed
# seconds and output, and counts failed checks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bazel's TEST_TMPDIR is too long for the unix sockets Open MPI creates.
export TMPDIR=$(mktemp -d /tmp/tessera-cli.XXXXXX)
trap 'rm -rf "$TMPDIR"' EXIT
export HOME=${HOME:-$TMPDIR}
export TESSERA_NUM_THREADS=1
LOG=$TMPDIR/out.log
failures=0
cli_test_dir=$(dirname "${BASH_SOURCE[0]}")

# run LIMIT_S COMMAND...: sets RC and ELAPSED; output in $LOG.
run() {
  local limit=$1
  shift
  local start=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" </dev/null >"$LOG" 2>&1
  RC=$?
  ELAPSED=$(($(date +%s) - start))
}

# mpi N LIMIT_S COMMAND...
mpi() {
  local n=$1 limit=$2
  shift 2
  run "$limit" mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np "$n" "$@"
}

fail() {
  echo "FAIL: $*"
  echo "---- output ----"
  cat "$LOG"
  echo "----------------"
  failures=$((failures + 1))
}

# expect_ok WHAT PATTERN: the last run exited 0 and printed PATTERN.
expect_ok() {
  if [ "$RC" -ne 0 ]; then fail "$1: exit $RC"
  elif ! grep -qF -- "$2" "$LOG"; then fail "$1: output lacks '$2'"
  else echo "ok: $1 (${ELAPSED}s)"; fi
}

# expect_error WHAT PATTERN [MAX_S]: the last run exited non-zero, within MAX_S seconds, and
# printed PATTERN.
expect_error() {
  local max=${3:-60}
  if [ "$RC" -eq 0 ]; then fail "$1: exited 0, expected an error"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ] || [ "$ELAPSED" -gt "$max" ]; then
    fail "$1: took ${ELAPSED}s (exit $RC), expected an error within ${max}s"
  elif ! grep -qF -- "$2" "$LOG"; then fail "$1: output lacks '$2'"
  else echo "ok: $1 fails with: $(grep -F -- "$2" "$LOG" | head -1)"; fi
}

# compare NAME A B [TOL] [--grad-norms]: the per-step losses of two metrics files within TOL
# relative (1e-4 by default), and with --grad-norms their gradient norms too (compare_losses.py).
compare() {
  if python3 "$cli_test_dir/compare_losses.py" "$2" "$3" "${4:-1e-4}" "${@:5}" >"$LOG" 2>&1; then
    echo "ok: $1: $(cat "$LOG")"
  else
    fail "$1: $(cat "$LOG")"
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all passed"
}
