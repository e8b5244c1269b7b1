"""Run llama.cpp's convert_hf_to_gguf.py (b11434) on a checkpoint whose tokenizer is not one of
the hashes it knows (the tiny fixture's), answering its pre-tokenizer question with "qwen35", the
answer it gives for the real Qwen3.5/3.6 tokenizer. Nothing else is changed.

    LLAMA_CPP=/path/to/llama.cpp python llama_convert.py HF_DIR --outtype f32 --no-mtp --outfile OUT
"""
import os
import sys

sys.path.insert(0, os.environ["LLAMA_CPP"])
sys.argv[0] = os.path.join(os.environ["LLAMA_CPP"], "convert_hf_to_gguf.py")

import convert_hf_to_gguf  # noqa: E402
from conversion.base import TextModel  # noqa: E402

TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen35"
convert_hf_to_gguf.main()
