#!/usr/bin/env bash
# The prepare binary end to end: byte and GPT-2 tokenisation of a small file with a validation
# split, the summary it prints, and clear failures for a missing file and a bad option.
set -euo pipefail
prepare=$1
fixtures=tests/models/data/fixtures
work=${TEST_TMPDIR:-$(mktemp -d)}
printf 'The quick brown fox jumps over the lazy dog. It'"'"'s 42 degrees.\n%.0s' {1..50} > "$work/in.txt"
bytes=$(stat -c %s "$work/in.txt")

"$prepare" --input "$work/in.txt" --output "$work/byte.tok" --tokenizer byte --val-fraction 0.1 \
  > "$work/out.txt" 2> "$work/err.txt"
cat "$work/out.txt"
train=$(( $(stat -c %s "$work/byte.tok") - 64 ))
val=$(( $(stat -c %s "$work/byte.val.tok") - 64 ))
# u16 ids: two bytes per token, one token per input byte.
[ $(( (train + val) / 2 )) -eq "$bytes" ] || { echo "expected $bytes tokens, got $(( (train + val) / 2 ))"; exit 1; }
head -c 8 "$work/byte.tok" | grep -q TSRATOK1 || { echo "missing magic"; exit 1; }
grep -q "100.0%" "$work/err.txt" || { echo "no progress bar on stderr"; exit 1; }
grep -q "val.tok" "$work/out.txt" || { echo "no validation summary"; exit 1; }

"$prepare" --input "$work/in.txt" --output "$work/gpt2.tok" --tokenizer gpt2 \
  --vocab "$fixtures/vocab.json" --merges "$fixtures/merges.txt" --append-eot --quiet > "$work/out2.txt"
grep -q "vocab 377" "$work/out2.txt" || { cat "$work/out2.txt"; echo "gpt2 summary wrong"; exit 1; }
[ "$(stat -c %s "$work/gpt2.tok")" -lt $(( 64 + 2 * bytes )) ] || { echo "BPE did not compress"; exit 1; }

if "$prepare" --input "$work/absent.txt" --output "$work/x.tok" --tokenizer byte 2> "$work/err3.txt"; then
  echo "missing input must fail"; exit 1
fi
grep -q "absent.txt" "$work/err3.txt" || { cat "$work/err3.txt"; exit 1; }
set +e
"$prepare" --input "$work/in.txt" --output "$work/x.tok" --tokenizer wordpiece 2> "$work/err4.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "bad tokenizer should exit 2, got $rc"; exit 1; }
grep -q "usage: prepare" "$work/err4.txt" || { echo "no usage on a bad option"; exit 1; }
[ ! -e "$work/x.tok" ] || { echo "failed runs must leave no output"; exit 1; }
echo "prepare tool OK"
