// The chunked gated delta rule of delta_rule_chunked.wgsl with its products on cooperative
// matrices (tensor cores): f16 operands, f32 sums, the state kept in f32 between chunks. The key
// dimension is padded with zeros to KEYS (the host runs delta_rule_chunked.wgsl for wider keys),
// and each C × COLS product stacks its two terms into one of depth KEYS + C:
//   V' = [−W | T']·[S; V]                         (C × COLS)
//   O  = [e^γ ⊙ Q | A]·[S; V']                    (rows past the end are not written)
//   S  ← e^{γ_last}·S + ((e^{γ_last − γ}) ⊙ K)ᵀ·V'   (KEYS × COLS, depth C)
// so that each subgroup takes one BLOCK × BLOCK block of the output over half of the depth, the
// two halves summed through workgroup memory, and in the state update one BLOCK × BLOCK block of
// S (the host gives BLOCK and SUBGROUP_SIZE: 8 subgroups of 32 with 16 × 16 blocks on tensor
// cores, 32 of 8 with 8 × 8 blocks on lavapipe). The left operands are staged as f16 in workgroup memory by the whole workgroup, row by row,
// so that their loads from the factors and from q and k are coalesced.

const KEYS: u32 = 128u;
const SUBGROUPS: u32 = THREADS / SUBGROUP_SIZE;
// A C × COLS product's blocks, each taken by two subgroups (one per half of the depth); the
// blocks of S, one per subgroup.
const PRODUCT_BLOCKS: u32 = (CHUNK / BLOCK) * (COLS / BLOCK);
const_assert SUBGROUPS == 2u * PRODUCT_BLOCKS;
const_assert SUBGROUPS == (KEYS / BLOCK) * (COLS / BLOCK);
const DEPTH: u32 = KEYS + CHUNK;
const HALF_STEPS: u32 = DEPTH / BLOCK / 2u;
// Eight halves of padding keep every row 16-byte aligned, as cooperative loads require.
const LHS_STRIDE: u32 = DEPTH + 8u;

var<workgroup> s: array<f32, KEYS * COLS>;
// [S; V] as f16, then [S; V'].
var<workgroup> rhs: array<f16, DEPTH * COLS>;
// [−W | T'], then [e^γ ⊙ Q | A], then (e^{γ_last − γ} ⊙ K) in the first KEYS columns.
var<workgroup> lhs: array<f16, CHUNK * LHS_STRIDE>;
// Each subgroup's block of a C × COLS product over its half of the depth.
var<workgroup> partial: array<f32, SUBGROUPS * BLOCK * BLOCK>;
var<workgroup> head: array<f32, CHUNK>;
var<workgroup> tail: array<f32, CHUNK>;

// This subgroup's block of lhs·rhs: block sg_id mod PRODUCT_BLOCKS (row blocks first), over
// depth half sg_id / PRODUCT_BLOCKS, into its block of `partial`.
fn multiply_half(sg_id: u32) {
    let product_block = sg_id % PRODUCT_BLOCKS;
    let a_at = (product_block % (CHUNK / BLOCK)) * BLOCK * LHS_STRIDE;
    let b_col = (product_block / (CHUNK / BLOCK)) * BLOCK;
    let first_step = (sg_id / PRODUCT_BLOCKS) * HALF_STEPS;
    var acc = BlockC();
    for (var step = 0u; step < HALF_STEPS; step++) {
        let depth = (first_step + step) * BLOCK;
        let a = coopLoadT<BlockA>(&lhs[a_at + depth], LHS_STRIDE);
        let b = coopLoadT<BlockB>(&rhs[depth * COLS + b_col], COLS);
        acc = coopMultiplyAdd(a, b, acc);
    }
    coopStoreT(acc, &partial[sg_id * BLOCK * BLOCK], BLOCK);
}

// Row t, column j of the product that multiply_half left in `partial`.
fn product_at(t: u32, j: u32) -> f32 {
    let product_block = t / BLOCK + (j / BLOCK) * (CHUNK / BLOCK);
    let at = product_block * BLOCK * BLOCK + (t % BLOCK) * BLOCK + j % BLOCK;
    return partial[at] + partial[at + PRODUCT_BLOCKS * BLOCK * BLOCK];
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg_id: u32,
) {
    // Workgroups of a folded grid past the last (head, columns) redo the last one and store
    // nothing: cooperative operations may not follow a return.
    let blocks = p.n_v_head * p.column_blocks;
    let id = workgroup_index(wid, nwg);
    let live = id < blocks;
    let block = min(id, blocks - 1u);
    let h = block / p.column_blocks;
    let j0 = (block % p.column_blocks) * COLS;
    let kh = h % p.n_k_head;
    let qk_cols = p.n_k_head * p.k_dim;
    let s_base = h * p.k_dim * p.v_dim;
    load_state(s_base, j0, KEYS, lid);

    for (var chunk = 0u; chunk < p.chunks; chunk++) {
        let t0 = p.first_row + chunk * CHUNK;
        let len = min(CHUNK, p.rows - t0);
        let f = factors_at(chunk, h);
        let w_at = f + 2u * CHUNK * CHUNK;
        let gamma_at = w_at + CHUNK * p.k_dim;
        // Everyone is done with the last chunk's operands and state.
        workgroupBarrier();
        load_decays(gamma_at, lid);
        for (var e = lid; e < CHUNK * DEPTH; e += THREADS) {
            let t = e / DEPTH;
            let c = e % DEPTH;
            var value = 0.0;
            if (c >= KEYS) {
                value = factors[f + t * CHUNK + c - KEYS];
            } else if (c < p.k_dim) {
                value = -factors[w_at + t * p.k_dim + c];
            }
            lhs[t * LHS_STRIDE + c] = f16(value);
        }
        for (var e = lid; e < DEPTH * COLS; e += THREADS) {
            let r = e / COLS;
            var value = 0.0;
            if (r < KEYS) {
                value = s[e];
            } else {
                value = value_at(t0, len, h, r - KEYS, j0 + e % COLS);
            }
            rhs[e] = f16(value);
        }
        workgroupBarrier();

        multiply_half(sg_id);
        workgroupBarrier();
        // V' over V, and the operand of O: e^γ ⊙ Q beside A.
        for (var e = lid; e < CHUNK * COLS; e += THREADS) {
            rhs[KEYS * COLS + e] = f16(product_at(e / COLS, e % COLS));
        }
        for (var e = lid; e < CHUNK * DEPTH; e += THREADS) {
            let t = e / DEPTH;
            let c = e % DEPTH;
            var value = 0.0;
            if (c >= KEYS) {
                value = factors[f + CHUNK * CHUNK + t * CHUNK + c - KEYS];
            } else if (t < len && c < p.k_dim) {
                value = q[(t0 + t) * qk_cols + kh * p.k_dim + c] * head[t];
            }
            lhs[t * LHS_STRIDE + c] = f16(value);
        }
        workgroupBarrier();

        multiply_half(sg_id);
        workgroupBarrier();
        // O out, and the operands of the state update: e^{γ_last}·S and the weighted keys.
        for (var e = lid; e < CHUNK * COLS; e += THREADS) {
            let o = product_at(e / COLS, e % COLS);
            if (live) {
                store_out(t0, len, h, e / COLS, j0 + e % COLS, o);
            }
        }
        for (var e = lid; e < CHUNK * KEYS; e += THREADS) {
            let t = e / KEYS;
            let i = e % KEYS;
            var value = 0.0;
            if (t < len && i < p.k_dim) {
                value = k[(t0 + t) * qk_cols + kh * p.k_dim + i] * tail[t];
            }
            lhs[t * LHS_STRIDE + i] = f16(value);
        }
        for (var e = lid; e < KEYS * COLS; e += THREADS) {
            s[e] *= head[CHUNK - 1u];
        }
        workgroupBarrier();

        // Block sg_id of S (key row blocks first); A = the weighted keys transposed
        // (column-major in lhs).
        let key_row = (sg_id % (KEYS / BLOCK)) * BLOCK;
        let col = (sg_id / (KEYS / BLOCK)) * BLOCK;
        let s_at = key_row * COLS + col;
        var acc = coopLoadT<BlockC>(&s[s_at], COLS);
        for (var step = 0u; step < CHUNK / BLOCK; step++) {
            let a = coopLoad<BlockA>(&lhs[step * BLOCK * LHS_STRIDE + key_row], LHS_STRIDE);
            let b = coopLoadT<BlockB>(&rhs[(KEYS + step * BLOCK) * COLS + col], COLS);
            acc = coopMultiplyAdd(a, b, acc);
        }
        coopStoreT(acc, &s[s_at], COLS);
    }
    workgroupBarrier();
    if (live) {
        store_state(s_base, j0, lid);
    }
}
