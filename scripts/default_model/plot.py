#!/usr/bin/env python3
"""The default model's loss curve from its training log.

    python3 scripts/default_model/plot.py models/default-train-log.jsonl models/default-loss.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    log_path, png = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(log_path, encoding="utf-8")]
    steps = [r for r in rows if not r.get("final")]
    # During training only the held-out split's first windows (stories) are scored; the whole
    # split once at the end. Two different measures: two series.
    held = [r for r in rows if "heldout_loss" in r and not r.get("final")]
    final = [r for r in rows if r.get("final")]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot([r["tokens"] / 1e6 for r in steps], [r["loss"] for r in steps], label="train (batch)")
    ax.plot([r["tokens"] / 1e6 for r in steps], [r["mtp_loss"] for r in steps], label="train, MTP head (t+2)", alpha=0.7)
    ax.plot([r["tokens"] / 1e6 for r in held], [r["heldout_loss"] for r in held], "o-", label="held-out, stories part")
    ax.plot([r["tokens"] / 1e6 for r in final], [r["heldout_loss"] for r in final], "s", label="held-out, whole split (end)")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title("qwen35 default model: training loss")
    fig.tight_layout()
    fig.savefig(png)


if __name__ == "__main__":
    main()
