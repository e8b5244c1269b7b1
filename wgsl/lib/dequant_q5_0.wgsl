// Q5_0: blocks of 22 bytes, f16 scale d, a little-endian u32 of fifth bits (bit i for element
// i), then Q4_0's nibble layout; x = d·(q − 16).
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + unit * 22u;
    let d = f16_at(base);
    let high_bits = u32_at(base + 2u);
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 16u; l++) {
        let q = byte_at(base + 6u + l);
        let lo = (q & 0xfu) | (((high_bits >> l) & 1u) << 4u);
        let hi = (q >> 4u) | (((high_bits >> (l + 16u)) & 1u) << 4u);
        out[l] = d * (f32(lo) - 16.0);
        out[l + 16u] = d * (f32(hi) - 16.0);
    }
    return out;
}
