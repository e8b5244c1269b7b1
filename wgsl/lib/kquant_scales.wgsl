// The 6-bit (scale, min) pair of sub-block j in the 12 packed scale bytes of Q4_K and Q5_K.
fn scale_min_k4(scales: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(byte_at(scales + j) & 63u), f32(byte_at(scales + j + 4u) & 63u));
    }
    let packed = byte_at(scales + j + 4u);
    let sc = (packed & 0xfu) | ((byte_at(scales + j - 4u) >> 6u) << 4u);
    let m = (packed >> 4u) | ((byte_at(scales + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}
