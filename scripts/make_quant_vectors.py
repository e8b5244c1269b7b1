#!/usr/bin/env python3
"""Writes the quant test vectors under tests/data/quant/ from gguf-py, an implementation
independent of ours.

For each format NAME:
  NAME.blocks  raw encoded blocks (random bytes with sane f16 scales, plus gguf-py-quantized
               random normal data where gguf-py can quantize the format)
  NAME.f32     gguf.quants.dequantize of NAME.blocks, little-endian f32
For the formats whose quantizer we match bit for bit:
  quantize_in.f32          random normal input (with a zero block, a tiny block and ties)
  NAME.quantize_out.blocks gguf.quants.quantize of it

Run: python3 scripts/make_quant_vectors.py (with gguf and numpy installed; see
tests/fixtures/README.md)
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "quant"
rng = np.random.default_rng(20240607)

# Byte offsets of each format's f16 scale fields inside a block.
SCALE_OFFSETS = {
    T.Q8_0: [0],
    T.Q4_0: [0],
    T.Q5_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
QUANTIZABLE_BY_GGUF = {T.Q8_0, T.Q4_0, T.Q5_0}


def random_f16_scales(n):
    """Mostly model-like magnitudes of both signs, plus zero, a subnormal and a large value."""
    scales = (rng.standard_normal(n) * 0.02).astype(np.float16)
    special = np.array([0.0, 6.0e-8, -3.0e-5, 1000.0], dtype=np.float16)
    scales[: min(n, len(special))] = special[: min(n, len(special))]
    return scales.view(np.uint8).reshape(n, 2)


def random_blocks(qtype, n_blocks):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for offset in SCALE_OFFSETS[qtype]:
        blocks[:, offset : offset + 2] = random_f16_scales(n_blocks)
    return blocks


def write(name, array):
    (OUT / name).write_bytes(np.ascontiguousarray(array).tobytes())


def block_vectors(qtype, n_random):
    blocks = random_blocks(qtype, n_random)
    if qtype in QUANTIZABLE_BY_GGUF:
        block_elems, _ = GGML_QUANT_SIZES[qtype]
        data = rng.standard_normal((4, block_elems)).astype(np.float32)
        blocks = np.concatenate([blocks, quants.quantize(data, qtype).reshape(4, -1)])
    expected = quants.dequantize(blocks.reshape(-1), qtype).astype("<f4")
    name = qtype.name
    write(f"{name}.blocks", blocks)
    write(f"{name}.f32", expected)


def float_vectors():
    # F16: every sign/exponent combination with random mantissas, including subnormals,
    # infinities and NaNs.
    f16_bits = (np.arange(64, dtype=np.uint16) << 10) | rng.integers(0, 1024, 64, dtype=np.uint16)
    f16_bits = np.concatenate([f16_bits, np.array([0x7C00, 0xFC00, 0x8000], dtype=np.uint16)])
    write("F16.blocks", f16_bits.astype("<u2"))
    write("F16.f32", quants.dequantize(f16_bits.view(np.uint8), T.F16).astype("<f4"))
    bf16_bits = rng.integers(0, 1 << 16, 67, dtype=np.uint16)
    write("BF16.blocks", bf16_bits.astype("<u2"))
    write("BF16.f32", quants.dequantize(bf16_bits.view(np.uint8), T.BF16).astype("<f4"))


def quantize_vectors():
    data = rng.standard_normal(8 * 32).astype(np.float32)
    data[:32] = 0.0  # an all-zero block
    data[32:64] *= 1e-3
    data[64] = 127.0 * 0.5  # exact ties against the block maximum
    data[65] = 127.0
    write("quantize_in.f32", data.astype("<f4"))
    for qtype in (T.Q8_0, T.BF16, T.F16):
        name = qtype.name
        write(f"{name}.quantize_out.blocks", quants.quantize(data, qtype).view(np.uint8))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for qtype in (T.Q8_0, T.Q4_0, T.Q5_0):
        block_vectors(qtype, 12)
    for qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        block_vectors(qtype, 6)
    float_vectors()
    quantize_vectors()
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
