#!/usr/bin/python3
"""Reference GPT-2 byte-pair encoding, written from the GPT-2 paper's description and its public
encoder's behaviour, and the fixtures Tessera's BPE tokenizer is checked against.

Writes into tests/models/data/fixtures/:
  vocab.json, merges.txt     a tiny GPT-2 style vocabulary: the 256 byte symbols, merges learned
                             here on a short text, and <|endoftext|>
  merges_shuffled.txt        the same merges in a seeded random order (ranks that no trainer would
                             produce), to pin down the merge-order semantics
  bpe_cases.json             texts with their reference pre-tokenisation pieces and ids under both

Needs Debian's python3-regex (tools/setup.sh installs it) for \\p{L} and \\p{N}.
Usage: /usr/bin/python3 tests/models/data/gen_bpe_fixtures.py
"""
import json
import os
import random

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

TRAIN_TEXT = """
The quick brown fox jumps over the lazy dog. The dog didn't mind; it's used to the fox.
They're training a tiny model on the hearth, and we've seen the loss fall: 3.14, then 2.71,
then 1.41 after 1000 steps. I'll check the logs, you'd better check the tokens. I'm sure
the tokenizer is right; the tests will tell. Tokens, tokens, tokens: the model learns them all.
Über café naïve résumé — déjà vu. Ελληνικά και русский текст, 中文字符 and more text.
"""


def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) +
                 list(range(0xAE, 0xFF + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()


def to_symbols(piece):
    return [BYTE_TO_CHAR[b] for b in piece.encode("utf-8")]


def learn_merges(text, count):
    """Plain BPE training: merge the most frequent adjacent pair (ties: smallest pair) each step."""
    words = {}
    for piece in PATTERN.findall(text):
        key = tuple(to_symbols(piece))
        words[key] = words.get(key, 0) + 1
    merges = []
    for _ in range(count):
        freq = {}
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                freq[pair] = freq.get(pair, 0) + n
        if not freq:
            break
        best = min(freq, key=lambda p: (-freq[p], p))
        merges.append(best)
        merged = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return merges


def bpe(symbols, ranks):
    """The reference merge loop: lowest-ranked pair, all its occurrences left to right, repeat."""
    word = list(symbols)
    while len(word) > 1:
        pairs = set(zip(word, word[1:]))
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                out.append(word[i] + word[i + 1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        word = out
    return word


def encode(text, vocab, ranks):
    ids = []
    for piece in PATTERN.findall(text):
        ids.extend(vocab[s] for s in bpe(to_symbols(piece), ranks))
    return ids


CASES = [
    "", "a", " ", "hello world", "Hello, World!", "The quick brown fox.",
    "it's they're we've I'm you'll he'd don't", "IT'S 'S 'll've '", "x'y 're'", "'",
    "3.14 and 1000 steps, 42nd", "  leading and trailing  ", "a\n\nb", "a\n \nb", "tabs\t\tand\ttabs",
    "end with newline\n", "\n\n\n", "   ", "a  b   c    d", "multiple\r\nlines\r\n",
    "tokens, tokens, tokens: the model learns them all.",
    "Über café naïve résumé — déjà vu.", "Ελληνικά και русский текст", "中文字符 and more",
    "हिन्दी भाषा", "العربية", "x² + y³ = ½", "Ⅻ ⅷ ① ٣٤", "ｆｕｌｌ１２３", "emoji 😀🚀 ok",
    "nbsp\u00a0here", "ideo\u3000space", "line\u2028sep", "fs\x1cgs\x1dx", "a\x85b", "zero\u200bwidth",
    "mixed123abc456", "...!!!???", " ... ", "e\u0301 combining", "__init__.py", "$100 @user #tag",
]


def random_cases(rng, count):
    alphabet = ["a", "b", "Z", "t", "s", "re", "ll", "'", " ", "  ", "\n", "\t", "\r\n", "1", "42",
                "²", "é", "ß", "中", "ж", "\u3000", "\u00a0", "\u2028", "!", ".", ",", "-", "\u0301",
                "😀", "\x1c", "\x85", "Ⅻ", "٣", "_", "\u200b"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(count)]


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    os.makedirs(here, exist_ok=True)
    merges = learn_merges(TRAIN_TEXT, 120)
    order = [BYTE_TO_CHAR[b] for b in sorted(range(256), key=lambda b: (ord(BYTE_TO_CHAR[b]) >= 256, b))]
    vocab = {s: i for i, s in enumerate(order)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    ranks = {pair: i for i, pair in enumerate(merges)}
    shuffled = list(merges)
    random.Random(7).shuffle(shuffled)
    shuffled_ranks = {pair: i for i, pair in enumerate(shuffled)}

    with open(os.path.join(here, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    for name, ms in (("merges.txt", merges), ("merges_shuffled.txt", shuffled)):
        with open(os.path.join(here, name), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in ms:
                f.write(f"{a} {b}\n")
    texts = CASES + random_cases(random.Random(1234), 300) + [TRAIN_TEXT]
    cases = [{
        "text": t,
        "pieces": PATTERN.findall(t),
        "ids": encode(t, vocab, ranks),
        "ids_shuffled": encode(t, vocab, shuffled_ranks),
    } for t in texts]
    with open(os.path.join(here, "bpe_cases.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab_size": len(vocab), "merges": len(merges), "cases": cases}, f,
                  ensure_ascii=False, indent=0)
    print(f"vocab {len(vocab)}, merges {len(merges)}, cases {len(cases)}")


if __name__ == "__main__":
    main()
