// The weight of a one-weight GEMV, for span readers that read it through `weight(i)`.
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

fn weight(i: u32) -> vec4<u32> {
    return w[i];
}
