"""Digest of GGUF files for byte comparisons without committing them: the sha256 of the whole
file, of the header (everything before the tensor data) and of each tensor's data, and the raw
bits of the F32 `ssm_a` tensors (−exp(A_log): torch's exp there is MKL's, which is not always
correctly rounded, so those values are compared to within 1 ulp).

    python digest_gguf.py OUT.json NAME=FILE.gguf ...
"""
import hashlib
import json
import sys

import gguf
import numpy as np

out = {}
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    reader = gguf.GGUFReader(path)
    raw = open(path, "rb").read()
    tensors, ssm_a = {}, {}
    for t in reader.tensors:
        data = raw[t.data_offset : t.data_offset + t.n_bytes]
        tensors[t.name] = hashlib.sha256(data).hexdigest()
        if t.name.endswith(".ssm_a"):
            ssm_a[t.name] = np.frombuffer(data, dtype="<u4").tolist()
    out[name] = {
        "file_sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "data_offset": reader.data_offset,
        "header_sha256": hashlib.sha256(raw[: reader.data_offset]).hexdigest(),
        "tensor_sha256": tensors,
        "ssm_a_bits": ssm_a,
    }
json.dump(out, open(sys.argv[1], "w"), indent=1)
