#!/bin/bash
# Smoke test for `bench adam` at gpt-tiny size: --help, usage errors (exit 2), the table without
# the peer, with an unusable peer (the reason printed) and with the PyTorch peer when this machine
# has one; every figure in a row is positive.
set -u
bench="$1"
fail() { echo "adam_smoke_test: $*" >&2; exit 1; }

# positive_cells ROW FIRST: every cell from column FIRST on (1-based, "-" excepted) is a number > 0
# after dropping a trailing "M" or "x".
positive_cells() {
  awk -F'|' -v first="$2" '{
    for (i = first + 1; i < NF; ++i) {
      c = $i; gsub(/^ +| +$/, "", c); sub(/[Mx]$/, "", c);
      if (c == "-") continue;
      if (c !~ /^[0-9]+(\.[0-9]+)?$/ || c + 0 <= 0) { print "cell " i - 1 " is \"" c "\""; exit 1 }
    }
  }' <<<"$1"
}

"$bench" --help | grep -qE "^  adam " || fail "expected bench --help to list adam"
"$bench" adam --help | grep -q -- "--models" || fail "expected bench adam --help to list --models"
"$bench" adam --models no-such-model >/dev/null 2>&1
[ $? -eq 2 ] || fail "expected exit status 2 for an unknown preset"
"$bench" adam --steps 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "expected exit status 2 for --steps 0"

quick=(--models gpt-tiny,gpt-mini --warmup 1 --steps 2 --threads 2)
out="$("$bench" adam "${quick[@]}" --no-peer 2>/dev/null)"
status=$?
echo "$out"
[ "$status" -eq 0 ] || fail "expected exit status 0, got $status"
grep -qE "^Tessera CPU AdamW step, f32: ISA avx(2|512), 2 threads" <<<"$out" ||
  fail "expected the header line"
grep -q "^| model " <<<"$out" || fail "expected the table header"
grep -q "PyTorch peer skipped (--no-peer)" <<<"$out" || fail "expected the no-peer note"
for m in gpt-tiny gpt-mini; do
  row="$(grep -E "^\| $m " <<<"$out")" || fail "expected a $m row"
  [ "$(awk -F'|' '{print NF}' <<<"$row")" -eq 7 ] || fail "expected 5 columns, got: $row"
  msg="$(positive_cells "$row" 2)" || fail "$m: $msg"
done

out="$("$bench" adam "${quick[@]}" --python /nonexistent/python3 2>/dev/null)"
[ $? -eq 0 ] || fail "expected exit status 0 without a usable peer"
grep -q "^PyTorch peer unavailable: /nonexistent/python3 not found" <<<"$out" ||
  fail "expected the peer-unavailable note, got: $out"

if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  out="$("$bench" adam "${quick[@]}" 2>/dev/null)"
  [ $? -eq 0 ] || fail "expected exit status 0 with the peer"
  echo "$out"
  grep -q "^PyTorch .* torch.optim.AdamW(foreach=True), 2 threads" <<<"$out" ||
    fail "expected the peer's line, got: $out"
  row="$(grep -E "^\| gpt-tiny " <<<"$out")" || fail "expected a gpt-tiny row"
  [ "$(awk -F'|' '{print NF}' <<<"$row")" -eq 10 ] || fail "expected 8 columns, got: $row"
  msg="$(positive_cells "$row" 2)" || fail "peer row: $msg"
else
  echo "adam_smoke_test: no torch for /usr/bin/python3; the peer case is skipped"
fi
echo "adam_smoke_test: ok"
