"""Writes gguf_py_reference.gguf with gguf-py (llama.cpp's reference writer), so the Rust reader is
checked against a file it did not write. Run: python3 make_reference.py"""

import numpy as np
import gguf

writer = gguf.GGUFWriter("gguf_py_reference.gguf", arch="qwen35")
writer.add_uint8("test.u8", 200)
writer.add_int8("test.i8", -100)
writer.add_uint16("test.u16", 60000)
writer.add_int16("test.i16", -30000)
writer.add_uint32("test.u32", 4000000000)
writer.add_int32("test.i32", -2000000000)
writer.add_float32("test.f32", 0.25)
writer.add_bool("test.bool", True)
writer.add_string("test.str", "héllo")
writer.add_uint64("test.u64", 2**64 - 2)
writer.add_int64("test.i64", -(2**62))
writer.add_float64("test.f64", -2.5)
writer.add_array("test.arr.str", ["Ġa", "", "bc"])
writer.add_array("test.arr.i32", [-1, 0, 5])
writer.add_array("test.arr.nested", [[1, 2], ["x"]])

vector = np.array([1.0, -2.0, 0.5], dtype=np.float32)
writer.add_tensor("t.vec", vector)
matrix = (np.arange(8, dtype=np.float32) - 4).reshape(2, 4).astype(np.float16)
writer.add_tensor("t.f16", matrix)
rows = np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 64)
q8 = gguf.quants.quantize(rows, gguf.GGMLQuantizationType.Q8_0)
writer.add_tensor("t.q8", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
