#!/usr/bin/env python3
"""Trains the default model: transformers' own Qwen3.5 text model plus one MTP layer.

    python3 scripts/default_model/train.py --data DIR --tokenizer DIR --out DIR [--seconds 430]
        [--tiny] [--device cuda]

DIR holds train.u16.xz and heldout.u16 (scripts/default_model/tokenizer.py writes the ids; the
training split travels xz-compressed). Training stops itself after --seconds of optimizer steps
(the learning rate schedule is laid over that time), then writes to --out: the HF checkpoint
(config.json, float32 safetensors shards of at most 14 MB, their index, the tokenizer files) and
train_log.jsonl (one line per logged step: train loss, MTP loss, held-out loss).

The MTP layer is Qwen3.5's: at position t it sees the main model's final hidden state at t and
the embedding of token t+1, both RMS-normed, concatenated and projected back to the hidden size,
then one full-attention decoder layer (causal, so it never sees past token t+1), the final norm
and the shared LM head; it predicts token t+2.
"""

import argparse
import json
import lzma
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

SEED = 1205
MTP_WEIGHT = 0.3
SHARD_BYTES = 14_000_000


def model_config(vocab: int, tiny: bool) -> Qwen3_5TextConfig:
    d, layers = (64, 4) if tiny else (256, 8)
    config = Qwen3_5TextConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=3 * d,
        num_hidden_layers=layers,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=32,
        linear_value_head_dim=32,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [3, 3, 2],
            "mrope_interleaved": True,
        },
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    config.mtp_num_hidden_layers = 1
    return config


class Mtp(torch.nn.Module):
    def __init__(self, config: Qwen3_5TextConfig):
        super().__init__()
        d = config.hidden_size
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(d, eps=config.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(d, eps=config.rms_norm_eps)
        self.fc = torch.nn.Linear(2 * d, d, bias=False)
        # The layer index only picks the layer type (and a cache slot, unused here).
        attention_index = config.layer_types.index("full_attention")
        self.layers = torch.nn.ModuleList([Qwen3_5DecoderLayer(config, attention_index)])
        self.norm = Qwen3_5RMSNorm(d, eps=config.rms_norm_eps)

    def forward(self, model: Qwen3_5ForCausalLM, hidden: torch.Tensor, next_ids: torch.Tensor):
        """hidden[:, t]: the main model's final hidden state at t; next_ids[:, t]: token t+1."""
        embedded = self.pre_fc_norm_embedding(model.model.embed_tokens(next_ids))
        x = self.fc(torch.cat([embedded, self.pre_fc_norm_hidden(hidden)], dim=-1))
        batch, length = next_ids.shape
        positions = torch.arange(length, device=x.device).view(1, 1, -1).expand(3, batch, -1)
        rope = model.model.rotary_emb(x, positions)
        # No mask given: SDPA runs causally (Qwen3_5Attention.is_causal); checked below.
        x = self.layers[0](x, position_embeddings=rope, attention_mask=None, position_ids=positions[0])
        return model.lm_head(self.norm(x))


def losses(model, mtp, window: torch.Tensor):
    inputs, labels = window[:, :-1], window[:, 1:]
    hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state
    logits = model.lm_head(hidden)
    main = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
    mtp_logits = mtp(model, hidden[:, :-1], inputs[:, 1:])
    extra = F.cross_entropy(mtp_logits.float().flatten(0, 1), labels[:, 1:].flatten())
    return main, extra


def check_mtp_is_causal(model, mtp, vocab: int, device) -> None:
    """Changing token j must leave the MTP output at every t < j - 1 alone, and change t = j - 1."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, 24), generator=g).to(device)
    changed = ids.clone()
    j = 15
    changed[0, j] = (ids[0, j] + 1) % vocab
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        outs = []
        for x in (ids, changed):
            hidden = model.model(input_ids=x, use_cache=False).last_hidden_state
            outs.append(mtp(model, hidden[:, :-1], x[:, 1:]).float())
    before = (outs[0][0, : j - 1] - outs[1][0, : j - 1]).abs().max().item()
    at = (outs[0][0, j - 1] - outs[1][0, j - 1]).abs().max().item()
    print(f"MTP causality: max |change| before t={j - 1}: {before:.3g}, at it: {at:.3g}", flush=True)
    if before > 1e-4 or at < 1e-4:
        sys.exit("the MTP layer is not causal")


def heldout_loss(model, mtp, heldout: np.ndarray, length: int, device, max_windows: int) -> tuple[float, float]:
    """Mean loss over non-overlapping windows of the held-out split (the same windows every time)."""
    n = min(max_windows, (len(heldout) - 1) // length)
    windows = torch.from_numpy(heldout[: n * length + 1].astype(np.int64))
    total, total_mtp = 0.0, 0.0
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for start in range(0, n, 32):
            rows = [windows[i * length : i * length + length + 1] for i in range(start, min(n, start + 32))]
            main, extra = losses(model, mtp, torch.stack(rows).to(device))
            total += main.item() * len(rows)
            total_mtp += extra.item() * len(rows)
    model.train()
    return total / n, total_mtp / n


def save_checkpoint(model, mtp, config, tokenizer: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    tensors.update({f"mtp.{k}": v for k, v in mtp.state_dict().items()})
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name in sorted(tensors):
        t = tensors[name].detach().float().cpu().contiguous()
        if size + t.numel() * 4 > SHARD_BYTES and shards[-1]:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += t.numel() * 4
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, out / file, metadata={"format": "pt"})
        weight_map.update({name: file for name in shard})
    total = sum(t.numel() * 4 for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    config.architectures = ["Qwen3_5ForCausalLM"]
    config.to_json_file(out / "config.json")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, out / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=430.0)
    parser.add_argument("--tiny", action="store_true", help="a tiny model and batch, for a CPU smoke test")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    started = time.time()
    torch.manual_seed(SEED)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    train = np.frombuffer(lzma.decompress((args.data / "train.u16.xz").read_bytes()), dtype=np.uint16)
    heldout = np.fromfile(args.data / "heldout.u16", dtype=np.uint16)
    vocab_size = json.loads((args.tokenizer / "tokenizer.json").read_text())
    vocab = len(vocab_size["model"]["vocab"]) + len(vocab_size["added_tokens"])
    vocab = (vocab + 63) // 64 * 64
    config = model_config(vocab, args.tiny)
    config._attn_implementation = "sdpa"
    model = Qwen3_5ForCausalLM(config).to(device)
    mtp = Mtp(config).to(device)
    mtp.apply(model._init_weights)
    params = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in mtp.parameters())
    main_params = sum(p.numel() for p in model.parameters())
    print(f"vocab {vocab}, main model {main_params} parameters, with MTP {params}; "
          f"train {len(train)} tokens, held-out {len(heldout)}", flush=True)
    check_mtp_is_causal(model, mtp, vocab, device)

    batch, length = (4, 64) if args.tiny else (128, 512)
    peak_lr, warmup, final_frac = 3e-3, 100, 0.05
    decay, no_decay = [], []
    for module in (model, mtp):
        for name, p in module.named_parameters():
            (decay if p.ndim == 2 and "embed" not in name else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=peak_lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda",
    )
    rng = np.random.default_rng(SEED)
    log = []
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = open(args.out / "train_log.jsonl", "w")
    eval_windows = 8 if args.tiny else 256
    t0 = time.time()
    step, tokens = 0, 0
    while True:
        elapsed = time.time() - t0
        progress = min(1.0, elapsed / args.seconds)
        if progress >= 1.0 or (args.tiny and step >= 30):
            break
        lr = peak_lr * min(1.0, (step + 1) / warmup) * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = rng.integers(0, len(train) - length - 1, size=batch)
        window = torch.from_numpy(np.stack([train[s : s + length + 1] for s in starts]).astype(np.int64)).to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            main, extra = losses(model, mtp, window)
            loss = main + MTP_WEIGHT * extra
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(mtp.parameters()), 1.0)
        opt.step()
        step += 1
        tokens += batch * length
        if step % 50 == 0 or step == 1 or (args.tiny and step % 10 == 0):
            entry = {"step": step, "tokens": tokens, "seconds": round(time.time() - t0, 1), "lr": lr,
                     "loss": main.item(), "mtp_loss": extra.item(), "grad_norm": norm.item()}
            if step % 500 == 0 or (args.tiny and step % 10 == 0):
                entry["heldout_loss"], entry["heldout_mtp_loss"] = heldout_loss(model, mtp, heldout, length, device, eval_windows)
            log.append(entry)
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()
            print(json.dumps(entry), flush=True)
    train_seconds = time.time() - t0
    final, final_mtp = heldout_loss(model, mtp, heldout, length, device, 10_000)
    entry = {"step": step, "tokens": tokens, "seconds": round(train_seconds, 1), "final": True,
             "heldout_loss": final, "heldout_mtp_loss": final_mtp, "heldout_tokens": ((len(heldout) - 1) // length) * length,
             "params": params, "main_params": main_params, "batch": batch, "length": length,
             "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}
    log_file.write(json.dumps(entry) + "\n")
    log_file.close()
    print(json.dumps(entry), flush=True)
    save_checkpoint(model, mtp, config, args.tokenizer, args.out / "hf")
    print(f"saved after {time.time() - started:.0f} s in all", flush=True)


if __name__ == "__main__":
    main()
