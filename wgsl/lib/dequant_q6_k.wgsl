// Q6_K: super-blocks of 256 elements in 210 bytes (Q6_K_BLOCK_BYTES apart: see
// q6_k_span.wgsl): 128 bytes of low nibbles, 64 bytes of high bit pairs, 16 signed 8-bit
// scales, f16 d. Each 128-element half n uses ql[64n..], qh[32n..]
// and scales[8n..]; its four 32-element parts p take the low (p < 2) or high nibble of
// ql[l + 32·(p % 2)] and bits 2p..2p+2 of qh[l]; x = d·scale·(q − 32).
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + (unit / 8u) * Q6_K_BLOCK_BYTES;
    let n = (unit % 8u) / 4u;
    let p = unit % 4u;
    let d = f16_at(base + 208u);
    let ql = base + 64u * n + 32u * (p % 2u);
    let qh = base + 128u + 32u * n;
    let scales = base + 192u + 8u * n + 2u * p;
    let nibble_shift = (p / 2u) * 4u;
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 32u; l++) {
        let lo = (byte_at(ql + l) >> nibble_shift) & 0xfu;
        let hi = (byte_at(qh + l) >> (2u * p)) & 3u;
        let q = i32(lo | (hi << 4u)) - 32;
        out[l] = d * f32(i8_at(scales + l / 16u)) * f32(q);
    }
    return out;
}
