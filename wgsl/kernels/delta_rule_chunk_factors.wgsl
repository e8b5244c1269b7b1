// The key-side factors of the chunked gated delta rule (QWEN35.md §5.5), which depend on q, k,
// g and β only, so every chunk of C tokens gets its own workgroup (per value head). With
// γ = the inclusive cumulative sum of g over the chunk and D_ij = exp(γ_i − γ_j) for j ≤ i:
//   L_ij = β_i (k_i·k_j) D_ij (j < i),   T = (I + L)⁻¹ (forward substitution),
//   T' = T·diag(β),   W = T'·(e^γ ⊙ K),   A_ij = (q_i·k_j) D_ij (j ≤ i).
// delta_rule_chunked.wgsl then applies them to the values and the carried state, chunk after
// chunk. Tokens past the end read as zeros with β = 0 and g = 0, so they change nothing. All
// exponents are ≤ 0 (g ≤ 0, and D is masked before the exponential).
// Output per (chunk, value head), in `factors`: T' (C × C), A (C × C), W (C × k_dim), γ (C).

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    rows: u32,
    first_row: u32,
    chunks: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read_write> factors: array<f32>;

const C: u32 = 64u;
const THREADS: u32 = 256u;
// Key columns staged in workgroup memory at a time (padded by one against bank conflicts).
const SLICE: u32 = 16u;
const SLICE_STRIDE: u32 = SLICE + 1u;
const TRI_STRIDE: u32 = C + 1u;
// Each invocation owns row i = lid / LANES_PER_ROW and columns j ≡ lid (mod LANES_PER_ROW)
// of the C × C matrices.
const LANES_PER_ROW: u32 = THREADS / C;
const PER_LANE: u32 = C / LANES_PER_ROW;

// L, then T in place (its unit diagonal implicit).
var<workgroup> tri: array<f32, C * TRI_STRIDE>;
var<workgroup> q_slice: array<f32, C * SLICE_STRIDE>;
var<workgroup> k_slice: array<f32, C * SLICE_STRIDE>;
var<workgroup> gamma: array<f32, C>;
var<workgroup> beta_c: array<f32, C>;

// Where the factors of (chunk, head) start.
fn factors_at(chunk: u32, h: u32) -> u32 {
    return (chunk * p.n_v_head + h) * (2u * C * C + C * p.k_dim + C);
}

// Key columns s0..s0+SLICE of the chunk's q and k rows (of key head kh), times `scale_by_gamma`
// ? e^γ_t : 1 for k, into the slices.
fn load_slices(t0: u32, len: u32, kh: u32, s0: u32, lid: u32, scale_by_gamma: bool) {
    let qk_cols = p.n_k_head * p.k_dim;
    for (var e = lid; e < C * SLICE; e += THREADS) {
        let t = e / SLICE;
        let c = e % SLICE;
        var qv = 0.0;
        var kv = 0.0;
        if (t < len && s0 + c < p.k_dim) {
            let at = (t0 + t) * qk_cols + kh * p.k_dim + s0 + c;
            qv = q[at];
            kv = k[at];
            if (scale_by_gamma) {
                kv *= exp(gamma[t]);
            }
        }
        q_slice[t * SLICE_STRIDE + c] = qv;
        k_slice[t * SLICE_STRIDE + c] = kv;
    }
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id % p.n_v_head;
    let chunk = id / p.n_v_head;
    // Uniform per workgroup: the whole workgroup leaves together, before any barrier.
    if (chunk >= p.chunks) {
        return;
    }
    let t0 = p.first_row + chunk * C;
    let len = min(C, p.rows - t0);
    let kh = h % p.n_k_head;
    let out = factors_at(chunk, h);

    if (lid < C) {
        var g_t = 0.0;
        var b_t = 0.0;
        if (lid < len) {
            g_t = g[(t0 + lid) * p.n_v_head + h];
            b_t = beta[(t0 + lid) * p.n_v_head + h];
        }
        gamma[lid] = g_t;
        beta_c[lid] = b_t;
    }
    workgroupBarrier();
    if (lid == 0u) {
        for (var t = 1u; t < C; t++) {
            gamma[t] += gamma[t - 1u];
        }
    }

    // k_i·k_j and q_i·k_j over the key columns, a slice at a time.
    let i = lid / LANES_PER_ROW;
    let lane = lid % LANES_PER_ROW;
    var kk: array<f32, PER_LANE>;
    var qk: array<f32, PER_LANE>;
    for (var s0 = 0u; s0 < p.k_dim; s0 += SLICE) {
        workgroupBarrier();
        load_slices(t0, len, kh, s0, lid, false);
        workgroupBarrier();
        for (var c = 0u; c < SLICE; c++) {
            let k_i = k_slice[i * SLICE_STRIDE + c];
            let q_i = q_slice[i * SLICE_STRIDE + c];
            for (var m = 0u; m < PER_LANE; m++) {
                let k_j = k_slice[(lane + LANES_PER_ROW * m) * SLICE_STRIDE + c];
                kk[m] += k_i * k_j;
                qk[m] += q_i * k_j;
            }
        }
    }

    // L into tri (zeros on and above the diagonal), A out.
    for (var m = 0u; m < PER_LANE; m++) {
        let j = lane + LANES_PER_ROW * m;
        var decay = 0.0;
        if (j <= i) {
            decay = exp(gamma[i] - gamma[j]);
        }
        var l = 0.0;
        if (j < i) {
            l = beta_c[i] * kk[m] * decay;
        }
        tri[i * TRI_STRIDE + j] = l;
        factors[out + C * C + i * C + j] = qk[m] * decay;
    }
    workgroupBarrier();

    // T = (I + L)⁻¹, row by row: T_im = −L_im − Σ_{m<j<i} L_ij T_jm. Row i of tri still holds L
    // while its T values are computed from the finished rows above.
    for (var r = 1u; r < C; r++) {
        var t_rm = 0.0;
        if (lid < r) {
            t_rm = -tri[r * TRI_STRIDE + lid];
            for (var j = lid + 1u; j < r; j++) {
                t_rm -= tri[r * TRI_STRIDE + j] * tri[j * TRI_STRIDE + lid];
            }
        }
        workgroupBarrier();
        if (lid < r) {
            tri[r * TRI_STRIDE + lid] = t_rm;
        }
        workgroupBarrier();
    }

    // T' = T·diag(β) out, and W = T'·(e^γ ⊙ K): invocation (i, lane) takes columns
    // lane·SLICE/LANES_PER_ROW.. of each slice.
    for (var m = 0u; m < PER_LANE; m++) {
        let j = lane + LANES_PER_ROW * m;
        var t_ij = tri[i * TRI_STRIDE + j];
        if (j == i) {
            t_ij = 1.0;
        }
        factors[out + i * C + j] = t_ij * beta_c[j];
    }
    let w_at = out + 2u * C * C;
    let cols_per_lane = SLICE / LANES_PER_ROW;
    for (var s0 = 0u; s0 < p.k_dim; s0 += SLICE) {
        workgroupBarrier();
        load_slices(t0, len, kh, s0, lid, true);
        workgroupBarrier();
        var w_row: array<f32, SLICE / LANES_PER_ROW>;
        for (var j = 0u; j <= i; j++) {
            var t_ij = tri[i * TRI_STRIDE + j];
            if (j == i) {
                t_ij = 1.0;
            }
            let weight = t_ij * beta_c[j];
            for (var c = 0u; c < cols_per_lane; c++) {
                w_row[c] += weight * k_slice[j * SLICE_STRIDE + lane * cols_per_lane + c];
            }
        }
        for (var c = 0u; c < cols_per_lane; c++) {
            let col = s0 + lane * cols_per_lane + c;
            if (col < p.k_dim) {
                factors[w_at + i * p.k_dim + col] = w_row[c];
            }
        }
    }
    if (lid < C) {
        factors[out + 2u * C * C + C * p.k_dim + lid] = gamma[lid];
    }
}
