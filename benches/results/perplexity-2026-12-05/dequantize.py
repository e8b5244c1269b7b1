"""Writes a copy of a GGUF with every tensor dequantized to F32 (metadata kept, file type set to
ALL_F32), so that llama-perplexity can run the quantized weights with f32 activations.

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 dequantize.py IN.gguf OUT.gguf
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize


def main(src: str, dst: str) -> None:
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = 0 if name == "general.file_type" else field.contents()
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, kind, sub_type=sub)
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        shape = tuple(int(d) for d in reversed(tensor.shape))
        writer.add_tensor(tensor.name, values.reshape(shape), raw_dtype=GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
