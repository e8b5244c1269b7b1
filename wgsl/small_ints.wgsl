// Small unsigned integers to f32 without integer→float conversions: NVIDIA GPUs issue those at
// an eighth of the FMA rate, and the quantized GEMVs spent most of their time in them (Q4_K and
// Q6_K both topped out near 2.5·10¹² weights/s on the H200, whatever their bytes per weight).
// A field m < 2²³ of a word (bits 0..22), left where it is and or-ed into the bits of 2²³, is the float
// 2²³ + m; subtracting 2²³ gives m exactly. A field at bit b reads as m·2ᵇ: the caller scales it
// back by a power of two, which is exact too.

fn mantissa_values(fields: vec4<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(fields | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
}

// An int8 stored as the byte b (0..255): b ^ 0x80 is the value + 128.
fn signed_byte_value(b: u32) -> f32 {
    return bitcast<f32>((b ^ 0x80u) | 0x4b000000u) - 8388736.0;
}
