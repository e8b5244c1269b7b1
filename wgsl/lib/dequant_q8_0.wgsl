// Q8_0: blocks of 34 bytes, f16 scale d then 32 signed bytes; x = d·q.
const UNIT: u32 = 32u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    let base = row + unit * 34u;
    let d = f16_at(base);
    var out: array<f32, UNIT>;
    for (var l = 0u; l < 32u; l++) {
        out[l] = d * f32(i8_at(base + 2u + l));
    }
    return out;
}
