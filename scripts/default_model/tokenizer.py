#!/usr/bin/env python3
"""The default model's tokenizer: a byte-level BPE trained on the corpus's training split.

    python3 scripts/default_model/tokenizer.py --corpus DIR --out DIR [--vocab 6144]

NFC, Qwen3.5's split regex, byte-level alphabet, and the Qwen special tokens after the learned
ones. Writes tokenizer.json and tokenizer_config.json (with the chat template) into --out, then
tokenizes both splits into DIR/{train,heldout}.u16 (uint16 ids, documents joined by
<|endoftext|>).
"""

import argparse
import json
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN35_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# (text, special): <think> and </think> are added tokens that stay visible in decoded text.
ADDED = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<think>", False),
    ("</think>", False),
]
# Every assistant turn carries an empty think block: the model never learned to reason, so the
# template closes it for the model whatever enable_thinking says.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
)


def documents(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def train_tokenizer(corpus: Path, vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN35_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    def texts():
        for doc in documents(corpus / "train.jsonl"):
            for name, _ in ADDED:
                doc = doc.replace(name, " ")
            yield doc

    tok.train_from_iterator(texts(), trainer)
    tok.add_special_tokens([AddedToken(t, special=s, normalized=False) for t, s in ADDED])
    return tok


def tokenizer_config(tok: Tokenizer) -> dict:
    added = {
        str(tok.token_to_id(text)): {
            "content": text,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for text, special in ADDED
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def encode_split(tok: Tokenizer, path: Path) -> np.ndarray:
    eot = tok.token_to_id("<|endoftext|>")
    docs = list(documents(path))
    ids: list[int] = []
    for start in range(0, len(docs), 4096):
        for enc in tok.encode_batch(docs[start : start + 4096]):
            ids.extend(enc.ids)
            ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=6144)
    args = parser.parse_args()
    tok = train_tokenizer(args.corpus, args.vocab)
    args.out.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out / "tokenizer.json"))
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(tok), indent=2) + "\n")
    for split in ("train", "heldout"):
        ids = encode_split(tok, args.corpus / f"{split}.jsonl")
        ids.tofile(args.corpus / f"{split}.u16")
        print(f"{split}: {len(ids)} tokens")


if __name__ == "__main__":
    main()
