"""The official `openai` Python client against `qwen35 serve` (driven by tests/serve.rs).

    python tests/serve_openai.py BASE_URL MESSAGE PROMPT MAX_TOKENS

Prints one JSON object: the greedy chat reply (whole and streamed), the text completion (whole
and streamed) and the listed model ids. Every call has a timeout and no retries.
"""

import json
import sys

from openai import OpenAI

base_url, message, prompt, max_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = OpenAI(base_url=base_url, api_key="unused", timeout=60, max_retries=0)
chat_args = dict(
    model="any",
    messages=[{"role": "user", "content": message}],
    temperature=0,
    max_tokens=max_tokens,
    extra_body={"chat_template_kwargs": {"enable_thinking": False}},
)

chat = client.chat.completions.create(**chat_args)
chat_stream = client.chat.completions.create(**chat_args, stream=True, stream_options={"include_usage": True})
streamed, finish, usage = [], None, None
for chunk in chat_stream:
    if chunk.usage is not None:
        usage = chunk.usage.completion_tokens
    for choice in chunk.choices:
        streamed.append(choice.delta.content or "")
        finish = choice.finish_reason or finish

completion = client.completions.create(model="any", prompt=prompt, temperature=0, max_tokens=max_tokens)
completion_stream = client.completions.create(
    model="any", prompt=prompt, temperature=0, max_tokens=max_tokens, stream=True
)
completion_streamed = "".join(c.choices[0].text for c in completion_stream if c.choices)

print(
    json.dumps(
        {
            "chat": chat.choices[0].message.content,
            "chat_finish": chat.choices[0].finish_reason,
            "chat_completion_tokens": chat.usage.completion_tokens,
            "chat_streamed": "".join(streamed),
            "chat_streamed_finish": finish,
            "chat_streamed_completion_tokens": usage,
            "completion": completion.choices[0].text,
            "completion_streamed": completion_streamed,
            "models": [m.id for m in client.models.list().data],
        }
    )
)
