// Weight blocks exactly as GGUF stores them, and each format decoded 32 values (one "unit") at a
// time for the kernels that do not need a tuned inner loop (embedding rows). UNITS is how many
// 32-value units one block holds.
#include <metal_stdlib>
using namespace metal;

struct block_f32 {
    enum { UNITS = 1 };
    float v[32];
};

struct block_f16 {
    enum { UNITS = 1 };
    half v[32];
};

struct block_q8_0 {
    enum { UNITS = 1 };
    half d;
    char qs[32];
};

// Value j < 16 is the low nibble of qs[j], value j + 16 the high nibble; bit j of qh is the
// fifth bit of value j.
struct block_q5_0 {
    enum { UNITS = 1 };
    half d;
    uchar qh[4];
    uchar qs[16];
};

// 256 values in 8 sub-blocks of 32, each with a 6-bit scale and min (packed in `scales`).
// Bytes qs[32c..32c+32] hold sub-block 2c in their low nibbles and 2c+1 in their high nibbles.
struct block_q4_k {
    enum { UNITS = 8 };
    half d;
    half dmin;
    uchar scales[12];
    uchar qs[128];
};

// Q4_K plus a fifth bit per value: bit u of qh[l] belongs to value l of sub-block u.
struct block_q5_k {
    enum { UNITS = 8 };
    half d;
    half dmin;
    uchar scales[12];
    uchar qh[32];
    uchar qs[128];
};

// 256 values in two halves of 128; in half n, value 32c + l (quadrant c) takes four bits from
// ql[64n + l] (c = 0, 2) or ql[64n + 32 + l] (c = 1, 3), low nibble for c < 2, and two bits from
// qh[32n + l] at 2c; each run of 16 values has a signed 8-bit scale.
struct block_q6_k {
    enum { UNITS = 8 };
    uchar ql[128];
    uchar qh[64];
    char scales[16];
    half d;
};

// The 6-bit scale (x) and min (y) of sub-block j of a Q4_K or Q5_K block.
inline uchar2 kquant_scale_min(device const uchar* s, uint j) {
    if (j < 4) {
        return uchar2(s[j] & 63, s[j + 4] & 63);
    }
    return uchar2((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4));
}

inline void dequantize_unit(device const block_f32& b, uint, thread float* out) {
    for (uint l = 0; l < 32; l++) {
        out[l] = b.v[l];
    }
}

inline void dequantize_unit(device const block_f16& b, uint, thread float* out) {
    for (uint l = 0; l < 32; l++) {
        out[l] = float(b.v[l]);
    }
}

inline void dequantize_unit(device const block_q8_0& b, uint, thread float* out) {
    float d = float(b.d);
    for (uint l = 0; l < 32; l++) {
        out[l] = d * float(b.qs[l]);
    }
}

inline void dequantize_unit(device const block_q5_0& b, uint, thread float* out) {
    float d = float(b.d);
    uint high = uint(b.qh[0]) | (uint(b.qh[1]) << 8) | (uint(b.qh[2]) << 16) | (uint(b.qh[3]) << 24);
    for (uint j = 0; j < 16; j++) {
        uint lo = (b.qs[j] & 0xF) | (((high >> j) & 1) << 4);
        uint hi = (b.qs[j] >> 4) | (((high >> (j + 16)) & 1) << 4);
        out[j] = d * (float(lo) - 16.0f);
        out[j + 16] = d * (float(hi) - 16.0f);
    }
}

inline void dequantize_unit(device const block_q4_k& b, uint unit, thread float* out) {
    uchar2 sm = kquant_scale_min(b.scales, unit);
    float scale = float(b.d) * float(sm.x);
    float min = float(b.dmin) * float(sm.y);
    uint shift = (unit % 2) * 4;
    for (uint l = 0; l < 32; l++) {
        out[l] = scale * float((b.qs[32 * (unit / 2) + l] >> shift) & 0xF) - min;
    }
}

inline void dequantize_unit(device const block_q5_k& b, uint unit, thread float* out) {
    uchar2 sm = kquant_scale_min(b.scales, unit);
    float scale = float(b.d) * float(sm.x);
    float min = float(b.dmin) * float(sm.y);
    uint shift = (unit % 2) * 4;
    for (uint l = 0; l < 32; l++) {
        uint q = ((b.qs[32 * (unit / 2) + l] >> shift) & 0xF) | (((b.qh[l] >> unit) & 1) << 4);
        out[l] = scale * float(q) - min;
    }
}

inline void dequantize_unit(device const block_q6_k& b, uint unit, thread float* out) {
    uint n = unit / 4;
    uint c = unit % 4;
    float d = float(b.d);
    for (uint l = 0; l < 32; l++) {
        uint low = b.ql[64 * n + 32 * (c % 2) + l];
        uint q = ((c < 2 ? low : low >> 4) & 0xF) | (((b.qh[32 * n + l] >> (2 * c)) & 3) << 4);
        float scale = d * float(b.scales[8 * n + 2 * c + l / 16]);
        out[l] = scale * float(int(q) - 32);
    }
}
