import sys, gguf, numpy as np
r = gguf.GGUFReader(sys.argv[1])
for k, f in r.fields.items():
    if k.startswith("GGUF."): continue
    t = f.types
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        vals = f.contents()
        s = f"[{len(vals)}] " + repr(vals[:5])[:120]
    else:
        s = repr(f.contents())[:200]
    print(k, [x.name for x in t], s)
print("tensors:")
for tt in r.tensors:
    print(tt.name, tt.tensor_type.name, list(tt.shape), tt.data_offset)
