//! Shape rules that every backend checks alike; each gives the detail of a mismatch.

#[cfg(doc)]
use super::Backend;
use super::{AttentionShape, DeltaNetShape, GatedAttention, Qkv};

/// Two `(rows, cols)` shapes must be equal.
pub fn same_dims(a: (usize, usize), b: (usize, usize)) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(format!("{}×{} vs {}×{}", a.0, a.1, b.0, b.1))
    }
}

/// The operands of [`Backend::attention`] (each a `(rows, cols)` shape) must fit
/// `shape`, and the caches must hold rows `pos0..pos0 + q.rows`.
pub fn attention(
    q: (usize, usize),
    k: (usize, usize),
    v: (usize, usize),
    k_cache: (usize, usize),
    v_cache: (usize, usize),
    pos0: usize,
    shape: AttentionShape,
) -> Result<(), String> {
    let kv_cols = shape.kv_cols();
    let fits = shape.n_kv_head > 0
        && shape.n_head.is_multiple_of(shape.n_kv_head)
        && q.1 == shape.n_head * shape.head_dim
        && k == (q.0, kv_cols)
        && v == (q.0, kv_cols)
        && k_cache.1 == kv_cols
        && v_cache.1 == kv_cols
        && pos0.saturating_add(q.0) <= k_cache.0.min(v_cache.0);
    if fits {
        Ok(())
    } else {
        Err(format!(
            "q {}×{}, k {}×{}, v {}×{}, caches {}×{} and {}×{} at {pos0} for {shape:?}",
            q.0, q.1, k.0, k.1, v.0, v.1, k_cache.0, k_cache.1, v_cache.0, v_cache.1
        ))
    }
}

/// Query tokens per block of a prefill attention kernel whose workgroups take `block_rows` rows
/// (token, q head), each token with every q head of one kv head, in heads of at most
/// `max_head_dim`; else why the shape does not fit.
pub fn attention_block_tokens(
    shape: AttentionShape,
    block_rows: usize,
    max_head_dim: usize,
) -> Result<usize, String> {
    let group = shape.n_head / shape.n_kv_head.max(1);
    if (1..=block_rows).contains(&group) && (1..=max_head_dim).contains(&shape.head_dim) {
        Ok(block_rows / group)
    } else {
        Err(format!(
            "{shape:?}: blocks of {block_rows} rows hold up to {block_rows} q heads a kv head, \
             heads of up to {max_head_dim}"
        ))
    }
}

/// The operands of [`Backend::gated_attention`] must fit its shape, with heads at most
/// `max_head_dim` wide (the kernel's limit); `dims` gives a tensor's `(rows, cols)`.
pub fn gated_attention<T>(
    op: &GatedAttention<'_, T>,
    max_head_dim: usize,
    dims: impl Fn(&T) -> (usize, usize),
) -> Result<(), String> {
    let AttentionShape {
        n_head,
        n_kv_head,
        head_dim,
    } = op.shape;
    let (rows, cols) = dims(op.q_and_gate);
    let fits = (1..=max_head_dim).contains(&head_dim)
        && cols == 2 * n_head * head_dim
        && dims(op.k) == (rows, n_kv_head * head_dim)
        && dims(op.q_norm) == (1, head_dim)
        && dims(op.k_norm) == (1, head_dim)
        && op.rope.dims <= head_dim
        && op.rope.dims.is_multiple_of(2);
    if fits {
        Ok(())
    } else {
        Err(format!(
            "q_and_gate {rows}×{cols}, k {:?}, norms {:?} and {:?}, rope over {} dims for \
             {n_head}/{n_kv_head} heads of {head_dim} (heads at most {max_head_dim})",
            dims(op.k),
            dims(op.q_norm),
            dims(op.k_norm),
            op.rope.dims
        ))
    }
}

/// `group` must be non-zero and divide `cols`.
pub fn whole_groups(cols: usize, group: usize) -> Result<(), String> {
    if group == 0 || !cols.is_multiple_of(group) {
        Err(format!("{cols} columns are not whole groups of {group}"))
    } else {
        Ok(())
    }
}

/// The operands of [`Backend::delta_rule`] (the gates being g and β, or the projections they
/// are computed from) must fit `shape`; `dims` gives a tensor's `(rows, cols)`.
pub fn delta_rule<T>(
    qkv: &Qkv<T>,
    gates: [&T; 2],
    state: &T,
    shape: DeltaNetShape,
    dims: impl Fn(&T) -> (usize, usize),
) -> Result<(), String> {
    let (key_width, value_width) = (shape.n_k_head * shape.k_dim, shape.n_v_head * shape.v_dim);
    let n = dims(&qkv.q).0;
    let fits = shape.n_k_head > 0
        && shape.k_dim > 0
        && shape.v_dim > 0
        && dims(&qkv.q) == (n, key_width)
        && dims(&qkv.k) == (n, key_width)
        && dims(&qkv.v) == (n, value_width)
        && gates.iter().all(|&gate| dims(gate) == (n, shape.n_v_head))
        && dims(state) == (shape.n_v_head, shape.k_dim * shape.v_dim);
    if fits {
        Ok(())
    } else {
        Err(format!(
            "q {:?}, k {:?}, v {:?}, gates {:?} and {:?}, state {:?} for {shape:?}",
            dims(&qkv.q),
            dims(&qkv.k),
            dims(&qkv.v),
            dims(gates[0]),
            dims(gates[1]),
            dims(state)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operands as `(rows, cols)` shapes: the check reads nothing else.
    fn delta_rule_dims(
        qkv: [(usize, usize); 3],
        gates: [(usize, usize); 2],
        state: (usize, usize),
    ) -> Result<(), String> {
        let shape = DeltaNetShape {
            n_k_head: 2,
            n_v_head: 4,
            k_dim: 3,
            v_dim: 5,
        };
        let [q, k, v] = qkv;
        let qkv = Qkv { q, k, v };
        delta_rule(&qkv, [&gates[0], &gates[1]], &state, shape, |&d| d)
    }

    #[test]
    fn delta_rule_operands_must_fit_the_shape() {
        let qkv = [(7, 6), (7, 6), (7, 20)];
        let gates = [(7, 4), (7, 4)];
        let state = (4, 15);
        assert_eq!(delta_rule_dims(qkv, gates, state), Ok(()));
        let wrong = [
            delta_rule_dims([(7, 6), (6, 6), (7, 20)], gates, state),
            delta_rule_dims([(7, 6), (7, 6), (7, 16)], gates, state),
            delta_rule_dims(qkv, [(7, 4), (7, 3)], state),
            delta_rule_dims(qkv, [(6, 4), (7, 4)], state),
            delta_rule_dims(qkv, gates, (4, 16)),
        ];
        for (i, result) in wrong.iter().enumerate() {
            assert!(result.is_err(), "mismatch {i} passed");
        }
        assert_eq!(
            wrong[4],
            Err(
                "q (7, 6), k (7, 6), v (7, 20), gates (7, 4) and (7, 4), state (4, 16) for \
                 DeltaNetShape { n_k_head: 2, n_v_head: 4, k_dim: 3, v_dim: 5 }"
                    .into()
            )
        );
    }
}
