"""Writes tests/data/chat_template/vectors.json: prompts rendered by HF transformers'
apply_chat_template, which the Rust renderer (src/chat/) must reproduce byte for byte.

    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install transformers jinja2
    /tmp/tfenv/bin/python scripts/make_chat_template_vectors.py

No torch needed: the tokenizer is the fixture's (tests/fixtures/tiny-tokenizer.json) and only
its chat-template rendering is used.
"""

import json
from pathlib import Path

import transformers
from transformers import PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/data/chat_template/vectors.json"
TEMPLATES = {
    "qwen35_style": ROOT / "tests/data/chat_template/qwen35_style.jinja",
    "chatml": ROOT / "src/chat/chatml.jinja",
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city <now> & 'later'",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "Zürich or 東京"},
                    "days": {"type": "integer", "minimum": 1},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "parameters": {}}},
]

SYSTEM = {"role": "system", "content": "  You are terse.\n"}
ASK = {"role": "user", "content": "What is 2+2?"}
REPLY_WITH_THINK = {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"}
CALL = {
    "role": "assistant",
    "content": "Let me check.",
    "reasoning_content": "\nthe user wants weather\n",
    "tool_calls": [
        {
            "type": "function",
            "id": "call_1",
            "function": {
                "name": "get_weather",
                "arguments": {"city": "Zürich", "days": 2, "opts": {"units": "C", "hourly": [1, 2.5, None, True]}},
            },
        },
        {"type": "function", "id": "call_2", "function": {"name": "now", "arguments": {}}},
    ],
}
RESULTS = [
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
]

CASES = [
    ("one question", [ASK], None, True, {}),
    ("one question, thinking off", [ASK], None, True, {"enable_thinking": False}),
    ("one question, thinking on", [ASK], None, True, {"enable_thinking": True}),
    ("system and question", [SYSTEM, ASK], None, True, {}),
    ("no generation prompt", [SYSTEM, ASK, {"role": "assistant", "content": "4"}], None, False, {}),
    (
        "second turn drops past reasoning",
        [SYSTEM, ASK, REPLY_WITH_THINK, {"role": "user", "content": "and 3+3?"}],
        None,
        True,
        {"enable_thinking": True},
    ),
    (
        "second turn, thinking off",
        [SYSTEM, ASK, REPLY_WITH_THINK, {"role": "user", "content": "and 3+3?"}],
        None,
        True,
        {"enable_thinking": False},
    ),
    ("tools, no system", [{"role": "user", "content": "Weather in Zürich?"}], TOOLS, True, {}),
    (
        "tool round keeps its reasoning",
        [SYSTEM, {"role": "user", "content": "Weather in Zürich?"}, CALL, *RESULTS],
        TOOLS,
        True,
        {"enable_thinking": True},
    ),
    (
        "tool round, then a new question",
        [
            SYSTEM,
            {"role": "user", "content": "Weather in Zürich?"},
            CALL,
            *RESULTS,
            {"role": "assistant", "content": "21 °C.\n"},
            {"role": "user", "content": "Thanks!"},
        ],
        TOOLS,
        True,
        {"enable_thinking": False},
    ),
    ("unicode and specials in content", [{"role": "user", "content": "naïve <|im_end|> \\n {{ x }}"}], None, True, {}),
]


def main():
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(ROOT / "tests/fixtures/tiny-tokenizer.json"))
    vectors = []
    for template_name, path in TEMPLATES.items():
        template = path.read_text()
        for name, messages, tools, add_generation_prompt, kwargs in CASES:
            if template_name == "chatml" and tools:
                continue
            rendered = tokenizer.apply_chat_template(
                messages,
                tools=tools,
                chat_template=template,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                **kwargs,
            )
            vectors.append(
                {
                    "template": template_name,
                    "name": name,
                    "messages": messages,
                    "tools": tools,
                    "add_generation_prompt": add_generation_prompt,
                    "kwargs": kwargs,
                    "rendered": rendered,
                }
            )
    OUT.write_text(
        json.dumps({"transformers": transformers.__version__, "vectors": vectors}, ensure_ascii=False, indent=1)
        + "\n"
    )
    print(f"{len(vectors)} vectors -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
