// Decoded weights as halves, clamped to the f16 range rather than becoming infinities: for the
// f16 scratch decoders (half_weights*.wgsl) and the cooperative GEMM's own tile decoders.

const F16_MAX: f32 = 65504.0;

// Eight values, clamped, as four words of halves.
fn clamped_halves(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
    let lo = clamp(a, vec4<f32>(-F16_MAX), vec4<f32>(F16_MAX));
    let hi = clamp(b, vec4<f32>(-F16_MAX), vec4<f32>(F16_MAX));
    return vec4<u32>(
        pack2x16float(lo.xy),
        pack2x16float(lo.zw),
        pack2x16float(hi.xy),
        pack2x16float(hi.zw),
    );
}
