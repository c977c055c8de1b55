#!/usr/bin/env bash
# Runs every test: the whole tree in the optimised build, then core, kernels and autograd again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Prints "N passed, M failed" (test targets) last.
# Usage: tools/test.sh [--no-asan]
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh

logs=$(mktemp -d)
status=0

run() {  # run NAME BAZEL-ARGS...: runs one bazel test invocation, keeps its summary lines
  local name=$1
  shift
  echo "== $name: bazel test $*"
  bazel test --color=no --curses=no --noshow_progress "$@" 2>&1 | tee "$logs/$name.log" |
    grep -E '^(//|ERROR|FAIL|Executed|INFO: Build completed|Target )' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}

run opt //...
if [ "${1:-}" != "--no-asan" ]; then
  run asan --config=asan //tests/core/... //tests/kernels/... //tests/autograd/...
fi

passed=$(cat "$logs"/*.log | grep -cE '^//\S+\s+(\(cached\) )?PASSED')
failed=$(cat "$logs"/*.log | grep -cE '^//\S+\s+(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)')
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1  # the build itself failed before any test ran
  echo "a bazel invocation failed; see the log above"
fi
rm -rf "$logs"
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
