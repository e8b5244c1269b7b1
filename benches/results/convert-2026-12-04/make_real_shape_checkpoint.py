"""A Qwen3.5-0.8B-shaped Hugging Face checkpoint with random bf16 weights, for timing
`qwen35 convert` / `quantize` and comparing them with llama.cpp's tools at a real shape:
Qwen3_5ForConditionalGeneration (text_config; a token vision tensor that must be skipped),
the real 0.8B text shapes (24 layers, 1024/3584, 8/2 heads of 256, GDN 16/16 heads of 128,
tied embeddings, vocab 248320), one MTP layer, two shards with an index. The tokenizer files
are the fixture's (ids beyond it become padding rows, as in the real vocabulary).

    python make_real_shape_checkpoint.py OUT_DIR
"""
import json
import shutil
import sys
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
fixture = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "hf"
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(fixture / name, out / name)

L, D, FF, H, HKV, HD = 24, 1024, 3584, 8, 2, 256
KH, VH, KD, VD, K = 16, 16, 128, 128, 4
V = 248320
text = {
    "model_type": "qwen3_5_text", "vocab_size": V, "hidden_size": D, "intermediate_size": FF,
    "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": HKV, "head_dim": HD,
    "linear_conv_kernel_dim": K, "linear_num_key_heads": KH, "linear_key_head_dim": KD,
    "linear_num_value_heads": VH, "linear_value_head_dim": VD, "full_attention_interval": 4,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)],
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "mtp_num_hidden_layers": 1,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    "tie_word_embeddings": True, "bos_token_id": 344, "eos_token_id": 346, "pad_token_id": 344,
    "hidden_act": "silu", "attention_bias": False,
}
config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
          "text_config": text, "vision_config": {"depth": 1}, "tie_word_embeddings": True}
(out / "config.json").write_text(json.dumps(config, indent=2))


def layer(prefix, full):
    t = {f"{prefix}.input_layernorm.weight": [D], f"{prefix}.post_attention_layernorm.weight": [D],
         f"{prefix}.mlp.gate_proj.weight": [FF, D], f"{prefix}.mlp.up_proj.weight": [FF, D],
         f"{prefix}.mlp.down_proj.weight": [D, FF]}
    if full:
        t.update({f"{prefix}.self_attn.q_proj.weight": [2 * H * HD, D],
                  f"{prefix}.self_attn.k_proj.weight": [HKV * HD, D],
                  f"{prefix}.self_attn.v_proj.weight": [HKV * HD, D],
                  f"{prefix}.self_attn.o_proj.weight": [D, H * HD],
                  f"{prefix}.self_attn.q_norm.weight": [HD], f"{prefix}.self_attn.k_norm.weight": [HD]})
    else:
        conv = 2 * KH * KD + VH * VD
        t.update({f"{prefix}.linear_attn.in_proj_qkv.weight": [conv, D],
                  f"{prefix}.linear_attn.in_proj_z.weight": [VH * VD, D],
                  f"{prefix}.linear_attn.in_proj_b.weight": [VH, D],
                  f"{prefix}.linear_attn.in_proj_a.weight": [VH, D],
                  f"{prefix}.linear_attn.conv1d.weight": [conv, 1, K],
                  f"{prefix}.linear_attn.dt_bias": [VH], f"{prefix}.linear_attn.A_log": [VH],
                  f"{prefix}.linear_attn.norm.weight": [VD],
                  f"{prefix}.linear_attn.out_proj.weight": [D, VH * VD]})
    return t


shapes = {"model.language_model.embed_tokens.weight": [V, D], "model.language_model.norm.weight": [D],
          "model.visual.patch_embed.proj.weight": [64, 3, 2, 16, 16]}
for i in range(L):
    shapes.update(layer(f"model.language_model.layers.{i}", (i + 1) % 4 == 0))
shapes.update(layer("mtp.layers.0", True))
shapes.update({"mtp.fc.weight": [D, 2 * D], "mtp.norm.weight": [D],
               "mtp.pre_fc_norm_embedding.weight": [D], "mtp.pre_fc_norm_hidden.weight": [D]})

rng = np.random.default_rng(0)
names = sorted(shapes)
shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
          "model-00002-of-00002.safetensors": names[len(names) // 2:]}
weight_map = {}
for shard, members in shards.items():
    header, offset = {}, 0
    for name in members:
        n = int(np.prod(shapes[name])) * 2
        header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [offset, offset + n]}
        offset += n
        weight_map[name] = shard
    text_header = json.dumps(header).encode()
    text_header += b" " * (-len(text_header) % 8)
    with open(out / shard, "wb") as f:
        f.write(len(text_header).to_bytes(8, "little"))
        f.write(text_header)
        for name in members:
            shape = shapes[name]
            fan_in = shape[-1] if len(shape) > 1 else 1
            x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32)
            if name.endswith("A_log"):
                x = np.log(rng.uniform(0.05, 2.0, x.size)).astype(np.float32)
            elif len(shape) == 1:
                x *= 0.1
            else:
                x /= np.sqrt(fan_in)
            f.write((x.view(np.uint32) >> 16).astype("<u2").tobytes())
(out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
print(f"{len(names)} tensors in {len(shards)} shards")
