// Q4_0: blocks of 18 bytes, f16 scale d then 16 bytes whose low nibbles are elements 0..16 and
// high nibbles elements 16..32; x = d·(q − 8).
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + unit * 18u;
    let d = f16_at(base);
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 16u; l++) {
        let q = byte_at(base + 2u + l);
        out[l] = d * (f32(q & 0xfu) - 8.0);
        out[l + 16u] = d * (f32(q >> 4u) - 8.0);
    }
    return out;
}
