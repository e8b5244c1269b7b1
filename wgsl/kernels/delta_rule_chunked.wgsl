// The gated delta rule over the tokens chunk by chunk (QWEN35.md §5.5), with the key-side factors
// T', A, W, γ of delta_rule_chunk_factors.wgsl. The columns of the state S (one per value
// dimension) evolve independently, so one workgroup per (value head, COLS columns) keeps its
// columns of S in workgroup memory and, for each chunk of C tokens in order:
//   V' = T'·V − W·S                       (C × COLS)
//   O  = (e^γ ⊙ Q)·S + A·V'               (rows past the end are not written)
//   S  ← e^{γ_last}·S + ((e^{γ_last − γ}) ⊙ K)ᵀ·V'
// S is the f32 state row of the head (k_dim × v_dim, key index major), read at the start and
// written back at the end, so that several dispatches can continue one sequence. The operands
// and the loads and stores: delta_rule_chunked_io.wgsl.

const MAX_K_DIM: u32 = 256u;
// In the C × COLS products each invocation owns one token row and QUAD = 4 columns.
const QUAD: u32 = 4u;
// In the state update each invocation owns one column and every ROW_STEP-th key row.
const ROW_STEP: u32 = THREADS / COLS;
const MAX_ROWS_PER_LANE: u32 = MAX_K_DIM / ROW_STEP;

var<workgroup> s: array<f32, MAX_K_DIM * COLS>;
// This chunk's values, then V'.
var<workgroup> vs: array<f32, CHUNK * COLS>;
var<workgroup> head: array<f32, CHUNK>;
var<workgroup> tail: array<f32, CHUNK>;

fn quad_at(a: u32) -> vec4<f32> {
    return vec4<f32>(vs[a], vs[a + 1u], vs[a + 2u], vs[a + 3u]);
}

fn state_quad_at(a: u32) -> vec4<f32> {
    return vec4<f32>(s[a], s[a + 1u], s[a + 2u], s[a + 3u]);
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id / p.column_blocks;
    // Uniform per workgroup: the whole workgroup leaves together, before any barrier.
    if (h >= p.n_v_head) {
        return;
    }
    let j0 = (id % p.column_blocks) * COLS;
    let kh = h % p.n_k_head;
    let qk_cols = p.n_k_head * p.k_dim;
    let s_base = h * p.k_dim * p.v_dim;
    load_state(s_base, j0, p.k_dim, lid);
    // Invocation (t, quad) of the C × COLS products.
    let t = lid / (COLS / QUAD);
    let jq = (lid % (COLS / QUAD)) * QUAD;
    // Invocation (column, rows) of the state update.
    let sc = lid % COLS;
    let sr = lid / COLS;

    for (var chunk = 0u; chunk < p.chunks; chunk++) {
        let t0 = p.first_row + chunk * CHUNK;
        let len = min(CHUNK, p.rows - t0);
        let f = factors_at(chunk, h);
        let w_at = f + 2u * CHUNK * CHUNK;
        let gamma_at = w_at + CHUNK * p.k_dim;
        // Everyone is done with the last chunk's values and state.
        workgroupBarrier();
        load_decays(gamma_at, lid);
        for (var e = lid; e < CHUNK * COLS; e += THREADS) {
            vs[e] = value_at(t0, len, h, e / COLS, j0 + e % COLS);
        }
        workgroupBarrier();

        // V' = T'·V − W·S, into vs once everyone has read V.
        var v_new = vec4<f32>(0.0);
        for (var m = 0u; m < CHUNK; m++) {
            v_new += factors[f + t * CHUNK + m] * quad_at(m * COLS + jq);
        }
        for (var i = 0u; i < p.k_dim; i++) {
            v_new -= factors[w_at + t * p.k_dim + i] * state_quad_at(i * COLS + jq);
        }
        workgroupBarrier();
        for (var c = 0u; c < QUAD; c++) {
            vs[t * COLS + jq + c] = v_new[c];
        }
        workgroupBarrier();

        // O = (e^γ ⊙ Q)·S + A·V'.
        if (t < len) {
            var o = vec4<f32>(0.0);
            let q_at = (t0 + t) * qk_cols + kh * p.k_dim;
            for (var i = 0u; i < p.k_dim; i++) {
                o += q[q_at + i] * state_quad_at(i * COLS + jq);
            }
            o *= head[t];
            for (var m = 0u; m <= t; m++) {
                o += factors[f + CHUNK * CHUNK + t * CHUNK + m] * quad_at(m * COLS + jq);
            }
            for (var c = 0u; c < QUAD; c++) {
                store_out(t0, len, h, t, j0 + jq + c, o[c]);
            }
        }

        // S ← e^{γ_last}·S + (tail ⊙ K)ᵀ·V', computed before anyone overwrites S.
        var s_new: array<f32, MAX_ROWS_PER_LANE>;
        for (var r = 0u; r < MAX_ROWS_PER_LANE; r++) {
            let i = sr + r * ROW_STEP;
            if (i < p.k_dim) {
                var acc = head[CHUNK - 1u] * s[i * COLS + sc];
                for (var tt = 0u; tt < len; tt++) {
                    acc += tail[tt] * k[(t0 + tt) * qk_cols + kh * p.k_dim + i] * vs[tt * COLS + sc];
                }
                s_new[r] = acc;
            }
        }
        workgroupBarrier();
        for (var r = 0u; r < MAX_ROWS_PER_LANE; r++) {
            let i = sr + r * ROW_STEP;
            if (i < p.k_dim) {
                s[i * COLS + sc] = s_new[r];
            }
        }
    }
    workgroupBarrier();
    store_state(s_base, j0, lid);
}
