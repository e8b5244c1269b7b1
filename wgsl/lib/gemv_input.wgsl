// The GEMV input as it is: row-major vec4s of x.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

fn x_at(row: u32, i: u32) -> vec4<f32> {
    return x[row + i];
}

fn input_row(t: u32, cols: u32) -> u32 {
    return t * (cols / 4u);
}
