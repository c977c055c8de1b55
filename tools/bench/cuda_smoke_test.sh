#!/bin/bash
# Smoke test for `bench cuda`: --help, usage errors (exit 2), and then either, without a usable GPU,
# the one-line no-GPU message with exit status 2, or, on a GPU, one tiny case per section with the
# three tables' columns and positive figures (beside PyTorch when python3 has a CUDA torch).
set -u
bench="$1"
fail() { echo "cuda_smoke_test: $*" >&2; exit 1; }

out="$("$bench" --help)"
grep -qE "^  cuda " <<<"$out" || fail "expected bench --help to list 'cuda', got: $out"
out="$("$bench" cuda --help)"
[ $? -eq 0 ] || fail "expected exit status 0 for bench cuda --help"
for flag in --peak-tflops --no-peer --steps --warmup --reps --gemm-sizes --attention --shapes \
  --precisions --python; do
  grep -q -- "$flag" <<<"$out" || fail "expected bench cuda --help to list $flag"
done
for bad in "--sections gemm,conv" "--attention 1x2x64x48" "--gemm-dtypes i32" \
  "--precisions f16" "--shapes 1x2048" "--peak-tflops -1" "--frobnicate"; do
  # shellcheck disable=SC2086
  err="$("$bench" cuda $bad 2>&1 >/dev/null)"
  [ $? -eq 2 ] || fail "expected exit status 2 for 'bench cuda $bad'"
  grep -q "^\[bench\] expected" <<<"$err" || fail "expected a '[bench] expected ...' message for '$bad', got: $err"
done

tiny=(--gemm-dtypes bf16,f32 --gemm-sizes 64x32x48,96x80x40 --attention 1x2x64x64,1x1x80x32
  --model gpt-tiny --shapes 2x16 --warmup 1 --reps 2 --steps 1)
out="$("$bench" cuda "${tiny[@]}" --no-peer 2>"$TEST_TMPDIR/err")"
status=$?
err="$(cat "$TEST_TMPDIR/err")"
if [ "$status" -eq 2 ]; then
  # No GPU: exactly one line on stderr naming why, nothing on stdout.
  [ -z "$out" ] || fail "expected no output without a GPU, got: $out"
  [ "$(wc -l <<<"$err")" -eq 1 ] || fail "expected a one-line message, got: $err"
  grep -qE "^bench cuda: no usable CUDA GPU: .+" <<<"$err" ||
    fail "expected 'bench cuda: no usable CUDA GPU: <reason>', got: $err"
  echo "$err"
  echo "cuda_smoke_test: OK (no GPU here: the message and exit status 2 checked)"
  exit 0
fi
echo "$out"
[ "$status" -eq 0 ] || fail "expected exit status 0 on a GPU, got $status: $err"
grep -q "^Tessera CUDA bench on device 0: .*compute capability" <<<"$out" ||
  fail "expected the device line"

# check_rows OUT SECTION_PREFIX COUNT CELLS: COUNT rows starting with SECTION_PREFIX, each with
# CELLS cells, every cell after the first two a positive number (units and '%', 'x' dropped).
check_rows() {
  local rows
  rows=$(grep -E "^\| $2" <<<"$1")
  [ "$(grep -c . <<<"$rows")" -eq "$3" ] || fail "expected $3 rows '$2', got: $rows"
  awk -F'|' -v cells="$4" '{
    if (NF - 2 != cells) { print "expected " cells " cells in: " $0; exit 1 }
    for (i = 4; i < NF; ++i) {
      c = $i; gsub(/^ +| +$/, "", c); sub(/ GiB$/, "", c); sub(/[x%]$/, "", c);
      if (c !~ /^[0-9]+(\.[0-9]+)?$/ || c + 0 <= 0) { print "cell \"" c "\" in: " $0; exit 1 }
    }
  }' <<<"$rows" || fail "bad row"
}

check_all() {  # check_all OUT CELLS_GEMM CELLS_TRAIN
  grep -q "^## GEMM" <<<"$1" || fail "expected the GEMM section"
  check_rows "$1" "(bf16|f32) +\| [0-9]+ x [0-9]+ x [0-9]+ +\|" 4 "$2"
  grep -q "^## Fused causal attention" <<<"$1" || fail "expected the attention section"
  check_rows "$1" "fwd(\+bwd)? +\| [0-9]+ x [0-9]+ x [0-9]+ x [0-9]+ +\|" 4 "$2"
  grep -q "^## GPT training step" <<<"$1" || fail "expected the training section"
  check_rows "$1" "(f32|bf16) +\| 2 x 16 +\|" 2 "$3"
}
check_all "$out" 4 6
[ "$(grep -c "PyTorch peer skipped (--no-peer)" <<<"$out")" -eq 3 ] || fail "expected 3 no-peer notes"

if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  out="$("$bench" cuda "${tiny[@]}" 2>/dev/null)"
  [ $? -eq 0 ] || fail "with peer: expected exit status 0"
  echo "$out"
  check_all "$out" 7 11
else
  echo "cuda_smoke_test: python3 has no CUDA torch; the peer is not checked"
fi
echo "cuda_smoke_test: OK"
