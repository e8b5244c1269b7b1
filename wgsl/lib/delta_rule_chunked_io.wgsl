// What the two kernels of the chunked delta rule share (delta_rule_chunked.wgsl in f32,
// delta_rule_chunked_coop.wgsl on cooperative matrices): the operands, the layout of the chunk
// factors of delta_rule_chunk_factors.wgsl, and the loads and stores of the state, the values,
// the decays and the output. One workgroup per (value head, COLS state columns); each kernel
// declares its own workgroup copy `s` of those columns (key index major, COLS a row) and the
// chunk's decays `head` = e^γ and `tail` = e^{γ_last − γ} (CHUNK each).

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    v_dim: u32,
    rows: u32,
    first_row: u32,
    chunks: u32,
    column_blocks: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> factors: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Tokens per chunk, the C of the comments (a name cooperative matrix types take as a role).
const CHUNK: u32 = 64u;
const THREADS: u32 = 256u;
const COLS: u32 = 16u;

// Where T' (C × C), A (C × C), W (C × k_dim) and γ (C) of (chunk, head) start, in that order.
fn factors_at(chunk: u32, h: u32) -> u32 {
    return (chunk * p.n_v_head + h) * (2u * CHUNK * CHUNK + CHUNK * p.k_dim + CHUNK);
}

// Key rows 0..key_rows of the state columns j0.. of the head whose state starts at s_base, into
// s; zeros past k_dim and v_dim.
fn load_state(s_base: u32, j0: u32, key_rows: u32, lid: u32) {
    for (var e = lid; e < key_rows * COLS; e += THREADS) {
        let i = e / COLS;
        let j = j0 + e % COLS;
        var value = 0.0;
        if (i < p.k_dim && j < p.v_dim) {
            value = state[s_base + i * p.v_dim + j];
        }
        s[e] = value;
    }
}

// s back into the state columns it was loaded from.
fn store_state(s_base: u32, j0: u32, lid: u32) {
    for (var e = lid; e < p.k_dim * COLS; e += THREADS) {
        let j = j0 + e % COLS;
        if (j < p.v_dim) {
            state[s_base + (e / COLS) * p.v_dim + j] = s[e];
        }
    }
}

// head and tail of the chunk whose γ start at gamma_at.
fn load_decays(gamma_at: u32, lid: u32) {
    if (lid < CHUNK) {
        let gamma_last = factors[gamma_at + CHUNK - 1u];
        head[lid] = exp(factors[gamma_at + lid]);
        tail[lid] = exp(gamma_last - factors[gamma_at + lid]);
    }
}

// Value column j of head h at row tt of the chunk of len rows from t0; zero past the ends.
fn value_at(t0: u32, len: u32, h: u32, tt: u32, j: u32) -> f32 {
    if (tt < len && j < p.v_dim) {
        return v[(t0 + tt) * p.n_v_head * p.v_dim + h * p.v_dim + j];
    }
    return 0.0;
}

// o of head h at row tt of the chunk, column j, where both exist.
fn store_out(t0: u32, len: u32, h: u32, tt: u32, j: u32, o: f32) {
    if (tt < len && j < p.v_dim) {
        out[(t0 + tt) * p.n_v_head * p.v_dim + h * p.v_dim + j] = o;
    }
}
