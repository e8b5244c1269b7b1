// Exact integer-to-float conversions through the float adder instead of the conversion unit (a
// quarter of the rate of integer arithmetic on NVIDIA): an integer placed in the mantissa of
// 2²³ (or of 1.5·2²³, for signed values) is exact, and subtracting that power leaves it.

// Unsigned values below 2²³.
fn small_to_f32(v: vec2<u32>) -> vec2<f32> {
    return bitcast<vec2<f32>>(v | vec2<u32>(0x4b000000u)) - vec2<f32>(8388608.0);
}

// Signed values of magnitude below 2²²: the integer dot products of the GEMV spans.
fn signed_to_f32(v: i32) -> f32 {
    return bitcast<f32>(v + 0x4b400000) - 12582912.0;
}
