// F16 weights: one element per unit.
const UNIT: u32 = 1u;

fn unit_values(row: u32, unit: u32) -> array<f32, UNIT> {
    return array<f32, UNIT>(f16_at(row + unit * 2u));
}
