#!/bin/bash
# Smoke test for `bench`: the subcommand list, the layer-norm kernel rows (quick, no peer), then
# `bench train` on gpt-tiny without and with the PyTorch peer. Checks exit statuses, header lines,
# the tables' columns and rows, and that every figure in them is positive.
set -u
bench="$1"
fail() { echo "bench_smoke_test: $*" >&2; exit 1; }

# positive_cells ROW FIRST: every cell from column FIRST on (1-based, "-" excepted) is a number > 0,
# after dropping a unit ("GB/s", "MB", a trailing "x").
positive_cells() {
  awk -F'|' -v first="$2" '{
    for (i = first + 1; i < NF; ++i) {
      c = $i; gsub(/^ +| +$/, "", c); sub(/ [A-Za-z\/]+$/, "", c); sub(/x$/, "", c);
      if (c == "-") continue;
      if (c !~ /^[0-9]+(\.[0-9]+)?$/ || c + 0 <= 0) { print "cell " i - 1 " is \"" c "\""; exit 1 }
    }
  }' <<<"$1"
}

out="$("$bench" --help)"
[ $? -eq 0 ] || fail "expected exit status 0 for --help"
for sub in kernels train comm; do
  grep -qE "^  $sub " <<<"$out" || fail "expected --help to list '$sub', got: $out"
done
"$bench" train --help | grep -q -- "--shapes" || fail "expected bench train --help to list --shapes"
"$bench" comm --help | grep -q -- "--max-bytes" || fail "expected bench comm --help to list --max-bytes"
"$bench" frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "expected exit status 2 for an unknown subcommand"

# ---- kernels ----
out="$("$bench" kernels --quick --no-peer --filter layer_norm --threads 1 2>/dev/null)"
status=$?
echo "$out"
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

# The linears' forward and backward rows, here a tensor-parallel shard, beside the PyTorch peer.
out="$("$bench" kernels --quick --threads 1 --filter "tp8 (1024, 96)" 2>/dev/null)"
[ $? -eq 0 ] || fail "expected exit status 0 for the linear rows"
echo "$out"
for op in linear linear_bwd; do
  row=$(grep -E "^\| $op +\| tp8 \(1024, 96\) -> \(1024, 768\) +\|" <<<"$out")
  [ -n "$row" ] || fail "expected a $op row for the tp8 shard, got: $out"
  msg=$(positive_cells "$row" 3) || fail "$op row: $msg: $row"
  if grep -q "^PyTorch .* eager" <<<"$out"; then  # the peer answered: both columns and a ratio
    grep -qE "GFLOP/s \| +[0-9.]+ GFLOP/s \| +[0-9.]+x \|" <<<"$row" ||
      fail "expected $op's PyTorch figure and ratio, got: $row"
  fi
done

# ---- gemm: OpenBLAS pinned to the ISA's kernels, the tensor-parallel shards ----
out="$("$bench" gemm --quick --isa avx2 --threads 1 --filter "T=256 768->768 " 2>/dev/null)"
status=$?
echo "$out"
[ "$status" -eq 0 ] || fail "gemm: expected exit status 0, got $status"
grep -q "^Tessera SGEMM vs OpenBLAS cblas_sgemm, f32, row-major: 1 threads" <<<"$out" ||
  fail "gemm: expected the header line"
# setup.sh installs OpenBLAS; the copy loaded must report the family it was pinned to.
grep -q "^## avx2: Tessera's avx2 micro-kernel vs OpenBLAS Haswell kernels (OpenBLAS " <<<"$out" ||
  fail "gemm: expected OpenBLAS on its Haswell kernels, got: $out"
rows=$(grep -E "^\| T=256 768->768 (fwd|dX|dW) " <<<"$out")
[ "$(wc -l <<<"$rows")" -eq 3 ] || fail "gemm: expected 3 rows (fwd, dX, dW), got: $rows"
while read -r row; do
  bad=$(positive_cells "$row" 2) || fail "gemm: $bad in: $row"
done <<<"$rows"
grep -qE "^ratio over 3 products: median [0-9.]+x, lowest" <<<"$out" ||
  fail "gemm: expected the ratio summary"
out="$("$bench" gemm --quick --no-peer --threads 1 --filter tp8 2>/dev/null)"
[ $? -eq 0 ] || fail "gemm --no-peer: expected exit status 0"
# 1D shards over 8 ranks: q|k|v 768->288, out 96->768, fc1 768->384, 3 products each; fc2's
# 384->768 is tp2's attention-output shard, timed once under that name.
[ "$(grep -cE "^\| T=1024 tp8 (768->288|96->768|768->384) (fwd|dX|dW) .*\| +- \| +- \|$" \
  <<<"$out")" -eq 9 ] || fail "gemm --no-peer: expected 9 tp8 rows without a peer, got: $out"
grep -q "^| T=1024 tp2 384->768 dW " <<<"$("$bench" gemm --quick --no-peer --filter 384- 2>/dev/null)" ||
  fail "gemm: expected the 384->768 shard under tp2"
grep -q "OpenBLAS .* kernels: skipped (--no-peer)" <<<"$out" || fail "gemm: expected the no-peer note"
TESSERA_ISA=avx2 "$bench" gemm --quick --isa avx512 >/dev/null 2>&1
[ $? -eq 2 ] || fail "gemm --isa avx512 under TESSERA_ISA=avx2: expected exit status 2"
for bad in "--isa sse" "--filter no_such_product" "--threads 0"; do
  # shellcheck disable=SC2086
  "$bench" gemm --quick $bad >/dev/null 2>&1
  [ $? -eq 2 ] || fail "gemm $bad: expected exit status 2"
done

# ---- train, Tessera only ----
out="$("$bench" train --model gpt-tiny --shapes 2x16,2x64 --warmup 1 --steps 2 --threads 1 \
  --no-peer 2>/dev/null)"
status=$?
echo "$out"
[ "$status" -eq 0 ] || fail "train: expected exit status 0, got $status"
grep -q "^Tessera GPT training step, gpt-tiny (0.[0-9]*M parameters), f32, AdamW: .* 1 threads" \
  <<<"$out" || fail "train: expected the header line"
header="| model    | B x T  | Tessera tok/s | Tessera step (s) | Tessera peak alloc | Tessera peak RSS |"
grep -qF -- "$header" <<<"$out" || fail "train: expected the table header '$header'"
grep -q "PyTorch peer skipped (--no-peer)" <<<"$out" || fail "train: expected the no-peer note"
for shape in "2 x 16" "2 x 64"; do
  row=$(grep -E "^\| gpt-tiny +\| $shape +\|" <<<"$out")
  [ -n "$row" ] || fail "train: expected a row for $shape"
  [ "$(awk -F'|' '{print NF}' <<<"$row")" -eq 8 ] || fail "train: expected 6 cells in '$row'"
  why=$(positive_cells "$row" 3) || fail "train: $shape: $why in '$row'"
done
"$bench" train --model gpt-tiny --shapes 2x65 --no-peer >/dev/null 2>&1
[ $? -eq 2 ] || fail "train: expected exit status 2 for T above gpt-tiny's context of 64"
"$bench" train --model no-such-model --no-peer >/dev/null 2>&1
[ $? -eq 2 ] || fail "train: expected exit status 2 for an unknown preset"

# ---- train beside PyTorch, where /usr/bin/python3 has torch ----
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  out="$("$bench" train --model gpt-tiny --shapes 2x32 --warmup 1 --steps 2 --threads 1 \
    2>/dev/null)"
  status=$?
  echo "$out"
  [ "$status" -eq 0 ] || fail "train with peer: expected exit status 0, got $status"
  grep -qE "^\| model .*\| Tessera tok/s \| PyTorch tok/s \| +ratio \| .*\| PyTorch peak RSS \|$" \
    <<<"$out" || fail "train with peer: expected the PyTorch columns"
  grep -q "^PyTorch .* eager, 1 threads" <<<"$out" || fail "train with peer: expected the peer note"
  row=$(grep -E "^\| gpt-tiny +\| 2 x 32 +\|" <<<"$out")
  [ "$(awk -F'|' '{print NF}' <<<"$row")" -eq 12 ] || fail "train with peer: expected 10 cells"
  grep -qE "\| +- +\|" <<<"$row" && fail "train with peer: expected no missing cell in '$row'"
  why=$(positive_cells "$row" 3) || fail "train with peer: $why in '$row'"
  # The peer's OpenBLAS runs the host ISA's kernels, never a generic fallback.
  grep -qE "BLAS openblas-[a-z]+ \((SkylakeX|Haswell)\)" <<<"$out" ||
    fail "train with peer: expected OpenBLAS pinned to SkylakeX or Haswell kernels"
  grep -q "^CPU time stolen by the hypervisor while Tessera ran: [0-9]*%, while PyTorch ran" \
    <<<"$out" || fail "train with peer: expected the steal line"
  # Two alternating rounds: medians, and each round's ratio in its own column.
  out="$("$bench" train --model gpt-tiny --shapes 2x32 --warmup 1 --steps 2 --threads 1 \
    --rounds 2 2>/dev/null)"
  [ $? -eq 0 ] || fail "train --rounds 2: expected exit status 0"
  grep -qE "^\| model .*\| +ratio \| ratio per round \|" <<<"$out" ||
    fail "train --rounds 2: expected the ratio-per-round column, got: $out"
  grep -qE "^\| gpt-tiny +\| 2 x 32 +\|.*\| +[0-9.]+x \| +[0-9.]+ [0-9.]+ \|" <<<"$out" ||
    fail "train --rounds 2: expected two ratios in the row, got: $out"
  grep -q "^2 rounds, Tessera then PyTorch in each" <<<"$out" ||
    fail "train --rounds 2: expected the rounds note"
  # bench kernels in two rounds: medians, each round's ratio in its own column.
  out="$("$bench" kernels --quick --rounds 2 --filter "layer_norm (256" --threads 1 2>/dev/null)"
  [ $? -eq 0 ] || fail "kernels --rounds 2: expected exit status 0"
  grep -qE "^\| layer_norm +\| \(256, 768\) +\|.*\| +[0-9.]+x \|.*\| +[0-9.]+ [0-9.]+ \|$" \
    <<<"$out" || fail "kernels --rounds 2: expected two ratios in the row, got: $out"
  grep -q "^2 rounds of every case, Tessera then PyTorch in turn" <<<"$out" ||
    fail "kernels --rounds 2: expected the rounds note"
else
  echo "bench_smoke_test: /usr/bin/python3 has no torch; the train peer is not checked"
fi
echo "bench_smoke_test: OK"
