// IEEE half bits (the low 16 bits of h) to f32, so that no f16 capability is needed and
// subnormal scales convert exactly. Scales are finite; an Inf or NaN half maps to a huge finite
// value.
fn half_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let exponent = (h >> 10u) & 0x1fu;
    let mantissa = h & 0x3ffu;
    if (exponent == 0u) {
        // Zero or subnormal: mantissa · 2⁻²⁴.
        let magnitude = f32(mantissa) * 5.9604645e-8;
        return bitcast<f32>(sign | bitcast<u32>(magnitude));
    }
    return bitcast<f32>(sign | ((exponent + 112u) << 23u) | (mantissa << 13u));
}
