// The GEMV input silu(gate) ⊙ up, computed as it is read (the MLP's down projection takes it
// without a separate SwiGLU pass).
@group(0) @binding(2) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> up: array<vec4<f32>>;

fn x_at(row: u32, i: u32) -> vec4<f32> {
    let g = gate[row + i];
    return g / (1.0 + exp(-g)) * up[row + i];
}

fn input_row(t: u32, cols: u32) -> u32 {
    return t * (cols / 4u);
}
