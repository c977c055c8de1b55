#!/bin/bash
# Smoke test for `bench`: the layer-norm rows, quick, no peer. Checks the exit status, the header
# line and that the table has a row with a positive GB/s figure for each layer-norm case.
set -u
bench="$1"
out="$("$bench" kernels --quick --no-peer --filter layer_norm --threads 1 2>/dev/null)"
status=$?
echo "$out"
fail() { echo "bench_smoke_test: $*" >&2; exit 1; }
[ "$status" -eq 0 ] || fail "expected exit status 0, got $status"
grep -q "^Tessera kernels, GPT-2 124M shapes, f32: GEMM ISA avx" <<<"$out" ||
  fail "expected the header line"
grep -q "^| op " <<<"$out" || fail "expected the table header"
grep -q "PyTorch peer skipped (--no-peer)" <<<"$out" || fail "expected the no-peer note"
row_re="^\| layer_norm(_bwd)? +\| \((256|1024), 768\) +\| +[0-9]+(\.[0-9]+)? GB/s \|"
rows=$(grep -cE "$row_re" <<<"$out")
[ "$rows" -eq 4 ] || fail "expected 4 layer_norm rows with a GB/s figure, got $rows"
grep -qE "\| +0(\.0+)? GB/s" <<<"$out" && fail "expected non-zero throughput"
# Without a usable peer the Tessera columns still print, with the reason.
out="$("$bench" --quick --python /nonexistent/python3 --filter "layer_norm (256" 2>/dev/null)"
[ $? -eq 0 ] || fail "expected exit status 0 without a peer"
grep -q "^PyTorch peer unavailable: /nonexistent/python3 not found" <<<"$out" ||
  fail "expected the peer-unavailable note, got: $out"
[ "$(grep -cE "$row_re" <<<"$out")" -eq 1 ] || fail "expected 1 layer_norm row without a peer"
# A filter that matches nothing is a usage error, not an empty table.
"$bench" --no-peer --filter no_such_op >/dev/null 2>&1
[ $? -eq 2 ] || fail "expected exit status 2 for a filter that matches nothing"
echo "bench_smoke_test: OK"
