// Gated DeltaNet gates, per token and value head: decay g = ssm_a · softplus(alpha + dt_bias)
// and write strength sigmoid(beta) (softplus.metal comes first).
#include <metal_stdlib>
using namespace metal;

struct DeltaNetGatesParams {
    uint n;
    uint heads;
};

kernel void delta_net_gates(constant DeltaNetGatesParams& p [[buffer(0)]],
                            device const float* alpha [[buffer(1)]],
                            device const float* beta [[buffer(2)]],
                            device const float* ssm_a [[buffer(3)]],
                            device const float* dt_bias [[buffer(4)]],
                            device float* g [[buffer(5)]],
                            device float* strength [[buffer(6)]],
                            uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        uint h = i % p.heads;
        g[i] = ssm_a[h] * softplus(alpha[i] + dt_bias[h]);
        strength[i] = 1.0f / (1.0f + exp(-beta[i]));
    }
}
