// Q4_K: super-blocks of 256 elements in 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and
// mins, 128 bytes of nibbles. A unit is one 32-element sub-block s: within each 64-element chunk
// the even sub-block takes the low nibbles and the odd one the high nibbles;
// x = d·scale·q − dmin·min.
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + (unit / 8u) * 144u;
    let s = unit % 8u;
    let d = f16_at(base);
    let dmin = f16_at(base + 2u);
    let sm = scale_min_k4(base + 4u, s);
    let scale = d * sm.x;
    let offset = dmin * sm.y;
    let qs = base + 16u + (s / 2u) * 32u;
    let shift = (s % 2u) * 4u;
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 32u; l++) {
        out[l] = scale * f32((byte_at(qs + l) >> shift) & 0xfu) - offset;
    }
    return out;
}
