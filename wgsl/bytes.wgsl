// Byte access into a weight buffer bound as `w: array<u32>`. Quantized blocks are packed with no
// padding (Q6_K blocks are 210 bytes, Q8_0 34), so fields sit at any byte offset.

fn byte_at(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 3u) * 8u)) & 0xffu;
}

fn i8_at(off: u32) -> i32 {
    return (i32(byte_at(off)) << 24u) >> 24u;
}

fn u16_at(off: u32) -> u32 {
    return byte_at(off) | (byte_at(off + 1u) << 8u);
}

// IEEE half to f32 by bits, so that no f16 capability is needed. Scales are finite; an Inf or NaN
// half maps to a huge finite value.
fn f16_at(off: u32) -> f32 {
    let h = u16_at(off);
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

fn u32_at(off: u32) -> u32 {
    return u16_at(off) | (u16_at(off + 2u) << 16u);
}
