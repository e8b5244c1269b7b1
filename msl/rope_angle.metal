// NeoX RoPE's rotation: dims i and i + rot_dims/2 of a head rotate together by
// pos · base^(−2i/rot_dims).
#include <metal_stdlib>
using namespace metal;

// Dim j (< rot_dims) of a head at `pos`, rotated against its partner: x is its value, partner the
// value of dim j ± rot_dims/2.
inline float rope_rotate(float x, float partner, uint j, uint rot_dims, uint pos, float base) {
    uint half_dims = rot_dims / 2;
    uint i = j % half_dims;
    // Precise functions: angles reach thousands of radians at long contexts.
    float inv_freq = 1.0f / precise::pow(base, float(2 * i) / float(rot_dims));
    float angle = float(pos) * inv_freq;
    float s = precise::sin(angle);
    float c = precise::cos(angle);
    return j < half_dims ? x * c - partner * s : x * c + partner * s;
}
