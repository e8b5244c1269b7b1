// softplus for the Gated DeltaNet's decay gate.
#include <metal_stdlib>
using namespace metal;

// log(1 + e^x), linear above 20 as in torch; log1p through the correction
// log(u) − ((u − 1) − e^x) / u, u = 1 + e^x, which keeps small e^x exact.
inline float softplus(float x) {
    if (x > 20.0f) {
        return x;
    }
    float e = exp(x);
    float u = 1.0f + e;
    return u == 1.0f ? e : log(u) - ((u - 1.0f) - e) / u;
}
