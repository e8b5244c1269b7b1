// The GEMV input as quantize_activations.wgsl leaves it: 9 vec4<u32> per 64 values of a row.
@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;

fn input_row(t: u32, cols: u32) -> u32 {
    return t * (cols / 64u * 9u);
}
