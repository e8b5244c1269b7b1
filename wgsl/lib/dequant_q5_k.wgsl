// Q5_K: super-blocks of 256 elements in 176 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and
// mins, 32 bytes of fifth bits (bit s of byte l for element l of sub-block s), 128 bytes of
// nibbles laid out as in Q4_K; x = d·scale·q − dmin·min.
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + (unit / 8u) * 176u;
    let s = unit % 8u;
    let d = f16_at(base);
    let dmin = f16_at(base + 2u);
    let sm = scale_min_k4(base + 4u, s);
    let scale = d * sm.x;
    let offset = dmin * sm.y;
    let qh = base + 16u;
    let qs = base + 48u + (s / 2u) * 32u;
    let shift = (s % 2u) * 4u;
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 32u; l++) {
        let q = ((byte_at(qs + l) >> shift) & 0xfu) | (((byte_at(qh + l) >> s) & 1u) << 4u);
        out[l] = scale * f32(q) - offset;
    }
    return out;
}
