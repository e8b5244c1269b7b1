// BF16 weights: the upper half of an f32, one element per unit.
const UNIT: u32 = 1u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    return array<f32, UNIT>(bitcast<f32>(u16_at(row + unit * 2u) << 16u));
}
