//! The ops the MSL kernels compute, written once against [`MslDevice`]: shape checks, output
//! allocation, parameters, launch geometry and buffer order. The GPU backend runs them on its
//! own buffers, launching each kernel through its [`MslLauncher`] (wgpu's MSL passthrough on a
//! Mac, the MSL simulator in the tests); the kernel tests run them on host memory through the
//! simulator's own device. Either way a simulated test exercises the real launch.

use super::msl_kernels::{MslFormat, MslKernel};
use super::{GpuError, Storage, Wgpu};
use crate::backend::{
    checks, AttentionCall, AttentionShape, BackendError, ConvQkvNorm, DeltaNetShape, DeltaRule,
    DeltaRuleGates, GatedAttention, GatedDeltaRule, KvCache, Qkv,
};
use crate::quant::GgmlType;

/// Where MSL kernels run: tensors and weights in device buffers, and dispatches.
pub trait MslDevice {
    type Tensor: Send + Sync;
    type Weight: Send + Sync;
    type Buffer: ?Sized;

    fn dims(&self, x: &Self::Tensor) -> (usize, usize);
    /// How the tensor's values lie in its buffer (f32 but for KV caches).
    fn storage(&self, x: &Self::Tensor) -> Storage;
    fn buffer<'a>(&self, x: &'a Self::Tensor) -> &'a Self::Buffer;
    fn weight<'a>(&self, w: &'a Self::Weight) -> WeightLayout<'a, Self::Buffer>;
    /// A tensor of `rows × cols` for a kernel to overwrite entirely.
    fn output(&self, rows: usize, cols: usize) -> Result<Self::Tensor, BackendError>;
    /// Runs (or records) one dispatch.
    fn dispatch(&self, dispatch: &Dispatch<'_, Self::Buffer>) -> Result<(), BackendError>;
}

/// Runs the MSL kernels on the GPU backend's buffers: the passthrough pipelines on a Metal
/// adapter (`backend::metal`), the MSL simulator in the tests.
pub trait MslLauncher: Send + Sync {
    /// Records (or runs) `dispatch` after the work recorded on `gpu` so far.
    fn launch(&self, gpu: &Wgpu, dispatch: &Dispatch<'_, wgpu::Buffer>) -> Result<(), GpuError>;
}

/// A weight as the kernels see it: rows of `row_bytes` file bytes, split into parts that each
/// fit one buffer binding.
pub struct WeightLayout<'a, B: ?Sized> {
    pub name: &'a str,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub row_bytes: usize,
    pub parts: Vec<WeightPart<'a, B>>,
}

pub struct WeightPart<'a, B: ?Sized> {
    pub first_row: usize,
    pub rows: usize,
    pub buffer: &'a B,
}

/// One kernel launch: `params` are the words of the kernel's parameter struct at
/// `[[buffer(0)]]`, `buffers[i]` is bound at `[[buffer(i + 1)]]`, and `threadgroups` groups of
/// `kernel.threads_per_threadgroup()` threads run along x.
pub struct Dispatch<'a, B: ?Sized> {
    pub kernel: MslKernel,
    pub params: &'a [u32],
    pub buffers: &'a [&'a B],
    pub threadgroups: u32,
    /// Bytes of weights and activations read, for the profile.
    pub bytes_read: u64,
}

fn shape_error(op: &'static str, detail: String) -> BackendError {
    BackendError::Shape { op, detail }
}

/// A kernel parameter: sizes reaching a kernel index buffers that exist, so only free-standing
/// values (positions, counts) can fail here.
fn word(op: &'static str, what: &str, n: usize) -> Result<u32, BackendError> {
    u32::try_from(n).map_err(|_| shape_error(op, format!("{what} {n} exceeds u32")))
}

fn f32_bytes(values: usize) -> u64 {
    values as u64 * 4
}

/// Records `kernel` over `threadgroups` groups after checking that the buffers match the
/// kernel's list.
fn run<D: MslDevice + ?Sized>(
    d: &D,
    kernel: MslKernel,
    params: &[u32],
    buffers: &[&D::Buffer],
    threadgroups: usize,
    bytes_read: u64,
) -> Result<(), BackendError> {
    debug_assert_eq!(buffers.len(), kernel.buffers().len(), "{kernel:?}");
    if threadgroups == 0 {
        return Ok(());
    }
    let threadgroups = word(kernel.entry(), "threadgroups", threadgroups)?;
    d.dispatch(&Dispatch {
        kernel,
        params,
        buffers,
        threadgroups,
        bytes_read,
    })
}

/// Threadgroups for one thread per element of `n`.
fn groups_for(kernel: MslKernel, n: usize) -> usize {
    n.div_ceil(kernel.threads_per_threadgroup() as usize)
}

fn same_dims<D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    a: &D::Tensor,
    b: &D::Tensor,
) -> Result<(), BackendError> {
    checks::same_dims(d.dims(a), d.dims(b)).map_err(|e| shape_error(op, e))
}

fn len<D: MslDevice + ?Sized>(d: &D, x: &D::Tensor) -> usize {
    let (rows, cols) = d.dims(x);
    rows * cols
}

/// Largest vocabulary whose ids are exact in f32 (argmax hands them to embed as f32).
const MAX_VOCAB: usize = 1 << 24;

/// The table's format, checked for the embedding kernel: whole 32-value units, ids exact in f32.
fn embed_table<'a, D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    table: &'a D::Weight,
) -> Result<(WeightLayout<'a, D::Buffer>, MslKernel), BackendError> {
    let w = d.weight(table);
    let format = MslFormat::from_ggml(w.ty)
        .ok_or_else(|| shape_error(op, format!("{}: no MSL kernel for {}", w.name, w.ty.name())))?;
    if !w.cols.is_multiple_of(32) || w.rows >= MAX_VOCAB {
        return Err(shape_error(
            op,
            format!(
                "{}: {} rows of {} (rows of whole 32-value units, fewer than {MAX_VOCAB})",
                w.name, w.rows, w.cols
            ),
        ));
    }
    Ok((w, MslKernel::Embed(format)))
}

/// Where the embedding kernel finds its tokens.
enum EmbedTokens<'a, B: ?Sized> {
    /// One token from the host, for output row `out_row`.
    Host { token: u32, out_row: usize },
    /// One exact f32 id per row of this buffer.
    Ids { ids: &'a B, rows: usize },
}

/// Records the embedding kernel on one part of the table: rows of tokens in other parts are
/// left alone.
fn embed_part<D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    kernel: MslKernel,
    w: &WeightLayout<'_, D::Buffer>,
    part: &WeightPart<'_, D::Buffer>,
    tokens: EmbedTokens<'_, D::Buffer>,
    out: &D::Tensor,
) -> Result<(), BackendError> {
    let units = w.cols / 32;
    // The host's tokens need no ids buffer; the part's bytes are bound in its place, unread.
    let (token, out_row, from_ids, rows, ids) = match tokens {
        EmbedTokens::Host { token, out_row } => (token, out_row, false, 1, part.buffer),
        EmbedTokens::Ids { ids, rows } => (0, 0, true, rows, ids),
    };
    let params = [
        token,
        out_row as u32,
        from_ids as u32,
        rows as u32,
        part.first_row as u32,
        part.rows as u32,
        word(op, "row bytes", w.row_bytes)?,
        units as u32,
    ];
    run(
        d,
        kernel,
        &params,
        &[part.buffer, ids, d.buffer(out)],
        groups_for(kernel, rows * units),
        (rows * w.row_bytes) as u64,
    )
}

/// Row `tokens[t]` of `table`, dequantized, for each t: one dispatch per token, on the part that
/// holds it, the token in the parameters (nothing to upload).
pub fn embed<D: MslDevice + ?Sized>(
    d: &D,
    table: &D::Weight,
    tokens: &[u32],
) -> Result<D::Tensor, BackendError> {
    let op = "embed";
    let (w, kernel) = embed_table(d, op, table)?;
    let out = d.output(tokens.len(), w.cols)?;
    for (out_row, &token) in tokens.iter().enumerate() {
        let part = w
            .parts
            .iter()
            .find(|p| (p.first_row..p.first_row + p.rows).contains(&(token as usize)))
            .ok_or(BackendError::TokenOutOfRange {
                token,
                vocab: w.rows,
            })?;
        let tokens = EmbedTokens::Host { token, out_row };
        embed_part(d, op, kernel, &w, part, tokens, &out)?;
    }
    Ok(out)
}

/// [`embed`] of the exact f32 ids in `ids` (one per row, as [`argmax`] leaves them), which stay
/// on the device: one dispatch per part of the table. An id outside the table embeds nothing
/// (its row keeps what the buffer held), which argmax never gives.
pub fn embed_ids<D: MslDevice + ?Sized>(
    d: &D,
    table: &D::Weight,
    ids: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    let op = "embed_ids";
    let (rows, cols) = d.dims(ids);
    if cols != 1 {
        return Err(shape_error(
            op,
            format!("ids are {rows}×{cols}, not one column"),
        ));
    }
    let (w, kernel) = embed_table(d, op, table)?;
    let out = d.output(rows, w.cols)?;
    for part in &w.parts {
        let tokens = EmbedTokens::Ids {
            ids: d.buffer(ids),
            rows,
        };
        embed_part(d, op, kernel, &w, part, tokens, &out)?;
    }
    Ok(out)
}

/// What a GEMV multiplies the weight by.
enum GemvInput<'a, T> {
    Plain(&'a T),
    /// silu(gate) ⊙ up.
    Swiglu {
        gate: &'a T,
        up: &'a T,
    },
    /// rms_norm(x) ⊙ norm over whole rows, the norm's factor gathered from the GEMV's own loads.
    Normed {
        x: &'a T,
        norm: &'a T,
        eps: f32,
    },
}

/// `y = x · Wᵀ` for every row of x: one GEMV dispatch per weight part, the tokens along the grid.
pub fn matmul<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    weight: &D::Weight,
) -> Result<D::Tensor, BackendError> {
    let out = d.output(d.dims(x).0, d.weight(weight).rows)?;
    gemv(d, "matmul", GemvInput::Plain(x), weight, &out, false)?;
    Ok(out)
}

/// `acc += x · Wᵀ`, the add done by the GEMV.
pub fn matmul_add<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    weight: &D::Weight,
    acc: &D::Tensor,
) -> Result<(), BackendError> {
    gemv(d, "matmul_add", GemvInput::Plain(x), weight, acc, true)
}

/// `acc += (silu(gate) ⊙ up) · Wᵀ`, the SwiGLU and the add done by the GEMV.
pub fn swiglu_matmul_add<D: MslDevice + ?Sized>(
    d: &D,
    gate: &D::Tensor,
    up: &D::Tensor,
    weight: &D::Weight,
    acc: &D::Tensor,
) -> Result<(), BackendError> {
    let op = "swiglu_matmul_add";
    same_dims(d, op, gate, up)?;
    gemv(d, op, GemvInput::Swiglu { gate, up }, weight, acc, true)
}

/// `rms_norm(x, norm, eps) · Wᵀ`, the norm done by the GEMV where it spans whole rows of x;
/// a norm over groups of columns is the norm kernel, then the GEMV.
pub fn rms_norm_matmul<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    norm: &D::Tensor,
    eps: f32,
    weight: &D::Weight,
) -> Result<D::Tensor, BackendError> {
    let (rows, cols) = d.dims(x);
    if d.dims(norm) != (1, cols) {
        return matmul(d, &rms_norm(d, x, norm, eps)?, weight);
    }
    let out = d.output(rows, d.weight(weight).rows)?;
    let input = GemvInput::Normed { x, norm, eps };
    gemv(d, "rms_norm_matmul", input, weight, &out, false)?;
    Ok(out)
}

/// Records the GEMV dispatches of `input · Wᵀ` into `out` (added to it with `accumulate`).
fn gemv<D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    input: GemvInput<'_, D::Tensor>,
    weight: &D::Weight,
    out: &D::Tensor,
    accumulate: bool,
) -> Result<(), BackendError> {
    let w = d.weight(weight);
    let format = MslFormat::from_ggml(w.ty)
        .ok_or_else(|| shape_error(op, format!("{}: no MSL GEMV for {}", w.name, w.ty.name())))?;
    // `other`: the input's second tensor, bound as `[[buffer(4)]]` (x again where none).
    let (kernel, x, other, eps) = match input {
        GemvInput::Plain(x) => (MslKernel::Gemv(format), x, x, 0.0),
        GemvInput::Swiglu { gate, up } => (MslKernel::GemvSwiglu(format), gate, up, 0.0),
        GemvInput::Normed { x, norm, eps } => (MslKernel::GemvNormed(format), x, norm, eps),
    };
    let (tokens, cols) = d.dims(x);
    if cols != w.cols || d.dims(out) != (tokens, w.rows) {
        let (out_rows, out_cols) = d.dims(out);
        return Err(shape_error(
            op,
            format!(
                "{tokens}×{cols} times {} ({}×{}) into {out_rows}×{out_cols}",
                w.name, w.rows, w.cols
            ),
        ));
    }
    let other_values = match kernel {
        MslKernel::GemvSwiglu(_) => tokens * cols,
        MslKernel::GemvNormed(_) => cols,
        _ => 0,
    };
    for part in &w.parts {
        let row_groups = part.rows.div_ceil(format.gemv_rows_per_threadgroup());
        let params = [
            part.rows as u32,
            cols as u32,
            word(op, "row bytes", w.row_bytes)?,
            w.rows as u32,
            part.first_row as u32,
            row_groups as u32,
            accumulate as u32,
            eps.to_bits(),
        ];
        run(
            d,
            kernel,
            &params,
            &[part.buffer, d.buffer(x), d.buffer(out), d.buffer(other)],
            row_groups * tokens,
            (part.rows * w.row_bytes) as u64 + f32_bytes(tokens * cols + other_values),
        )?;
    }
    Ok(())
}

/// Copies `n` values from `src[src_offset..]` to `dst[dst_offset..]`.
fn copy<D: MslDevice + ?Sized>(
    d: &D,
    src: &D::Tensor,
    src_offset: usize,
    dst: &D::Tensor,
    dst_offset: usize,
    n: usize,
) -> Result<(), BackendError> {
    let kernel = MslKernel::CopyRows;
    run(
        d,
        kernel,
        &[n as u32, src_offset as u32, dst_offset as u32],
        &[d.buffer(src), d.buffer(dst)],
        groups_for(kernel, n),
        f32_bytes(n),
    )
}

/// Rows `start..start+count` of x.
pub fn rows<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    start: usize,
    count: usize,
) -> Result<D::Tensor, BackendError> {
    let (rows, cols) = d.dims(x);
    if start.checked_add(count).is_none_or(|end| end > rows) {
        return Err(shape_error(
            "rows",
            format!("rows {start}..+{count} of {rows}"),
        ));
    }
    let out = d.output(count, cols)?;
    copy(d, x, start * cols, &out, 0, count * cols)?;
    Ok(out)
}

/// In each group of `group` columns, the columns `offset..offset+width`, concatenated.
pub fn slice_cols<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    group: usize,
    offset: usize,
    width: usize,
) -> Result<D::Tensor, BackendError> {
    let op = "slice_cols";
    let (rows, cols) = d.dims(x);
    checks::whole_groups(cols, group).map_err(|e| shape_error(op, e))?;
    if width == 0 || offset.checked_add(width).is_none_or(|end| end > group) {
        return Err(shape_error(
            op,
            format!("columns {offset}..+{width} of groups of {group}"),
        ));
    }
    let out = d.output(rows, cols / group * width)?;
    let n = len(d, &out);
    let kernel = MslKernel::SliceCols;
    run(
        d,
        kernel,
        &[n as u32, group as u32, offset as u32, width as u32],
        &[d.buffer(x), d.buffer(&out)],
        groups_for(kernel, n),
        f32_bytes(n),
    )?;
    Ok(out)
}

/// The norm over groups of `w.cols` columns, gated by silu(z) when z is given.
fn rms_norm_kernel<D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    x: &D::Tensor,
    z: Option<&D::Tensor>,
    w: &D::Tensor,
    eps: f32,
) -> Result<D::Tensor, BackendError> {
    let (rows, cols) = d.dims(x);
    let (w_rows, group) = d.dims(w);
    if w_rows != 1 || group == 0 {
        return Err(shape_error(
            op,
            format!("weight is {w_rows}×{group}, not one row"),
        ));
    }
    checks::whole_groups(cols, group).map_err(|e| shape_error(op, e))?;
    if let Some(z) = z {
        same_dims(d, op, x, z)?;
    }
    let out = d.output(rows, cols)?;
    let groups = rows * cols / group;
    run(
        d,
        MslKernel::RmsNorm,
        &[group as u32, eps.to_bits(), z.is_some() as u32],
        &[
            d.buffer(x),
            d.buffer(w),
            d.buffer(z.unwrap_or(x)),
            d.buffer(&out),
        ],
        groups,
        f32_bytes(rows * cols * (1 + z.is_some() as usize) + group),
    )?;
    Ok(out)
}

/// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w`.
pub fn rms_norm<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    w: &D::Tensor,
    eps: f32,
) -> Result<D::Tensor, BackendError> {
    rms_norm_kernel(d, "rms_norm", x, None, w, eps)
}

/// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w ⊙ silu(z)`.
pub fn gated_rms_norm<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    z: &D::Tensor,
    w: &D::Tensor,
    eps: f32,
) -> Result<D::Tensor, BackendError> {
    rms_norm_kernel(d, "gated_rms_norm", x, Some(z), w, eps)
}

/// Each group of `group` columns: `x · scale / sqrt(Σx² + eps)`.
pub fn l2_norm<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    group: usize,
    scale: f32,
    eps: f32,
) -> Result<D::Tensor, BackendError> {
    let (rows, cols) = d.dims(x);
    checks::whole_groups(cols, group).map_err(|e| shape_error("l2_norm", e))?;
    let out = d.output(rows, cols)?;
    run(
        d,
        MslKernel::L2Norm,
        &[group as u32, scale.to_bits(), eps.to_bits()],
        &[d.buffer(x), d.buffer(&out)],
        rows * cols / group,
        f32_bytes(rows * cols),
    )?;
    Ok(out)
}

/// `x += y`.
pub fn add<D: MslDevice + ?Sized>(d: &D, x: &D::Tensor, y: &D::Tensor) -> Result<(), BackendError> {
    same_dims(d, "add", x, y)?;
    let n = len(d, x);
    let kernel = MslKernel::Add;
    run(
        d,
        kernel,
        &[n as u32],
        &[d.buffer(x), d.buffer(y)],
        groups_for(kernel, n),
        f32_bytes(2 * n),
    )
}

/// An elementwise kernel of two inputs of one shape into a new tensor.
fn elementwise<D: MslDevice + ?Sized>(
    d: &D,
    op: &'static str,
    kernel: MslKernel,
    a: &D::Tensor,
    b: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    same_dims(d, op, a, b)?;
    let (rows, cols) = d.dims(a);
    let out = d.output(rows, cols)?;
    let n = rows * cols;
    run(
        d,
        kernel,
        &[n as u32],
        &[d.buffer(a), d.buffer(b), d.buffer(&out)],
        groups_for(kernel, n),
        f32_bytes(2 * n),
    )?;
    Ok(out)
}

/// `silu(gate) ⊙ up`.
pub fn swiglu<D: MslDevice + ?Sized>(
    d: &D,
    gate: &D::Tensor,
    up: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    elementwise(d, "swiglu", MslKernel::Swiglu, gate, up)
}

/// `x ⊙ sigmoid(gate)`.
pub fn sigmoid_mul<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    gate: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    elementwise(d, "sigmoid_mul", MslKernel::SigmoidMul, x, gate)
}

/// NeoX RoPE on the first `rot_dims` of every `head_dim` group, row t at `pos0 + t`.
pub fn rope<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    head_dim: usize,
    rot_dims: usize,
    freq_base: f32,
    pos0: usize,
) -> Result<D::Tensor, BackendError> {
    let op = "rope";
    let (rows, cols) = d.dims(x);
    checks::whole_groups(cols, head_dim).map_err(|e| shape_error(op, e))?;
    if rot_dims > head_dim || !rot_dims.is_multiple_of(2) {
        return Err(shape_error(
            op,
            format!("{rot_dims} rotary dims in heads of {head_dim}"),
        ));
    }
    word(op, "position", pos0.saturating_add(rows))?;
    let out = d.output(rows, cols)?;
    let n = rows * cols;
    let kernel = MslKernel::Rope;
    run(
        d,
        kernel,
        &[
            n as u32,
            cols as u32,
            head_dim as u32,
            rot_dims as u32,
            pos0 as u32,
            freq_base.to_bits(),
        ],
        &[d.buffer(x), d.buffer(&out)],
        groups_for(kernel, n),
        f32_bytes(n),
    )?;
    Ok(out)
}

/// Largest head_dim the attention and qk-norm kernels hold (`MAX_HEAD_DIM` in
/// attention_blocks.metal and qk_norm_rope.metal).
const MAX_HEAD_DIM: usize = 256;
/// Cache rows per threadgroup of decode attention (`BLOCK_ROWS` in attention_blocks.metal).
const ATTENTION_BLOCK_ROWS: usize = 128;

/// Writes k, v into cache row `pos0`, then softmax attention of the one query row over cache
/// rows `0..=pos0`, scale 1/sqrt(head_dim): the cache split into blocks, one threadgroup per
/// (q head, block), then the blocks merged per head (two dispatches).
pub fn attention<D: MslDevice + ?Sized>(
    d: &D,
    q: &D::Tensor,
    k: &D::Tensor,
    v: &D::Tensor,
    cache: &KvCache<'_, D::Tensor>,
    shape: AttentionShape,
) -> Result<D::Tensor, BackendError> {
    decode_attention(d, AttentionCall::new([q, k, v], cache, shape, None))
}

/// [`attention`] of q and k RMS-normed per head and rotated (NeoX RoPE at `pos0`), q being the
/// first head_dim of each 2·head_dim group of `q_and_gate`, the output times sigmoid of the
/// second: three dispatches.
pub fn gated_attention<D: MslDevice + ?Sized>(
    d: &D,
    op: &GatedAttention<'_, D::Tensor>,
    cache: &KvCache<'_, D::Tensor>,
) -> Result<D::Tensor, BackendError> {
    checks::gated_attention(op, MAX_HEAD_DIM, |t| d.dims(t))
        .map_err(|e| shape_error("gated_attention", e))?;
    let shape = op.shape;
    let (rows, cols) = d.dims(op.q_and_gate);
    if rows != 1 {
        return Err(shape_error(
            "gated_attention",
            format!("{rows} rows of q_and_gate: the MSL kernels take one"),
        ));
    }
    let q = d.output(1, shape.n_head * shape.head_dim)?;
    let k_rotated = d.output(1, shape.n_kv_head * shape.head_dim)?;
    run(
        d,
        MslKernel::QkNormRope,
        &[
            shape.n_head as u32,
            shape.n_kv_head as u32,
            shape.head_dim as u32,
            op.rope.dims as u32,
            word("gated_attention", "position", cache.pos0)?,
            op.rope.base.to_bits(),
            op.eps.to_bits(),
        ],
        &[
            d.buffer(op.q_and_gate),
            d.buffer(op.k),
            d.buffer(op.q_norm),
            d.buffer(op.k_norm),
            d.buffer(&q),
            d.buffer(&k_rotated),
        ],
        shape.n_head + shape.n_kv_head,
        f32_bytes(cols + 2 * shape.n_kv_head * shape.head_dim + 2 * shape.head_dim),
    )?;
    decode_attention(
        d,
        AttentionCall::new([&q, &k_rotated, op.v], cache, shape, Some(op.q_and_gate)),
    )
}

/// The two decode-attention dispatches, the output gated by the gate halves of `gate` if given.
fn decode_attention<D: MslDevice + ?Sized>(
    d: &D,
    call: AttentionCall<'_, D::Tensor>,
) -> Result<D::Tensor, BackendError> {
    let op = "attention";
    let AttentionShape {
        n_head,
        n_kv_head,
        head_dim,
    } = call.shape;
    let rows = d.dims(call.q).0;
    if rows != 1 || !(1..=MAX_HEAD_DIM).contains(&head_dim) {
        return Err(shape_error(
            op,
            format!(
                "{rows} query rows with heads of {head_dim}: one row, heads of 1..={MAX_HEAD_DIM}"
            ),
        ));
    }
    checks::attention(
        d.dims(call.q),
        d.dims(call.k),
        d.dims(call.v),
        d.dims(call.k_cache),
        d.dims(call.v_cache),
        call.pos0,
        call.shape,
    )
    .map_err(|e| shape_error(op, e))?;
    let storage = d.storage(call.k_cache);
    if d.storage(call.v_cache) != storage {
        return Err(shape_error(
            op,
            format!("caches in {storage:?} and {:?}", d.storage(call.v_cache)),
        ));
    }
    let kv_cols = call.shape.kv_cols();
    let blocks = (call.pos0 + 1).div_ceil(ATTENTION_BLOCK_ROWS);
    let partials = d.output(n_head * blocks, 2 + head_dim)?;
    let scale = call.shape.scale();
    run(
        d,
        MslKernel::AttentionBlocks(storage),
        &[
            n_head as u32,
            n_kv_head as u32,
            head_dim as u32,
            word(op, "position", call.pos0)?,
            kv_cols as u32,
            blocks as u32,
            scale.to_bits(),
        ],
        &[
            d.buffer(call.q),
            d.buffer(call.k),
            d.buffer(call.v),
            d.buffer(call.k_cache),
            d.buffer(call.v_cache),
            d.buffer(&partials),
        ],
        n_head * blocks,
        f32_bytes(n_head * head_dim)
            + 2 * ((call.pos0 + 1) * kv_cols) as u64 * storage.value_bytes(),
    )?;
    let out = d.output(1, n_head * head_dim)?;
    run(
        d,
        MslKernel::AttentionCombine,
        &[head_dim as u32, blocks as u32, call.gate.is_some() as u32],
        &[
            d.buffer(&partials),
            d.buffer(call.gate.unwrap_or(call.q)),
            d.buffer(&out),
        ],
        n_head,
        f32_bytes(len(d, &partials) + call.gate.map_or(0, |_| n_head * head_dim)),
    )?;
    Ok(out)
}

/// Largest conv width the kernel holds (`MAX_TAPS` in conv1d_silu.metal).
const MAX_TAPS: usize = 8;

/// Causal depthwise conv (`w`: one row of taps per channel, oldest first) over the carried
/// inputs in `state` (taps−1 rows) followed by x, then SiLU; `state` keeps the last rows.
pub fn conv1d_silu<D: MslDevice + ?Sized>(
    d: &D,
    x: &D::Tensor,
    w: &D::Tensor,
    state: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    let (rows, channels) = d.dims(x);
    let (w_rows, taps) = d.dims(w);
    let state_dims = d.dims(state);
    if !(1..=MAX_TAPS).contains(&taps) || w_rows != channels || state_dims != (taps - 1, channels) {
        return Err(shape_error(
            "conv1d_silu",
            format!(
                "x {rows}×{channels}, w {w_rows}×{taps} (at most {MAX_TAPS} taps), state {}×{}",
                state_dims.0, state_dims.1
            ),
        ));
    }
    let out = d.output(rows, channels)?;
    let kernel = MslKernel::Conv1dSilu;
    run(
        d,
        kernel,
        &[channels as u32, taps as u32, rows as u32],
        &[d.buffer(x), d.buffer(w), d.buffer(state), d.buffer(&out)],
        groups_for(kernel, channels),
        f32_bytes((rows + taps + taps - 1) * channels),
    )?;
    Ok(out)
}

/// Widest head conv_qkv_norm holds: 256 threads of `CHANNELS_PER_THREAD` (4) channels.
const MAX_CONV_HEAD: usize = 1024;

/// [`conv1d_silu`] of m, split into q | k | v, q and k L2-normalised per head, q scaled by
/// `q_scale`: one threadgroup per head.
pub fn conv_qkv_norm<D: MslDevice + ?Sized>(
    d: &D,
    op: &ConvQkvNorm<'_, D::Tensor>,
    state: &D::Tensor,
) -> Result<Qkv<D::Tensor>, BackendError> {
    let (m, w, shape) = (op.m, op.w, op.shape);
    let (rows, channels) = d.dims(m);
    let (w_rows, taps) = d.dims(w);
    let (key_width, value_width) = (shape.n_k_head * shape.k_dim, shape.n_v_head * shape.v_dim);
    let fits = (1..=MAX_TAPS).contains(&taps)
        && shape.n_k_head > 0
        && shape.n_v_head > 0
        && (1..=MAX_CONV_HEAD).contains(&shape.k_dim)
        && (1..=MAX_CONV_HEAD).contains(&shape.v_dim)
        && channels == 2 * key_width + value_width
        && w_rows == channels
        && d.dims(state) == (taps - 1, channels);
    if !fits {
        return Err(shape_error(
            "conv_qkv_norm",
            format!(
                "m {rows}×{channels}, w {w_rows}×{taps}, state {:?} for {shape:?} (at most \
                 {MAX_TAPS} taps, heads at most {MAX_CONV_HEAD} wide)",
                d.dims(state)
            ),
        ));
    }
    let q = d.output(rows, key_width)?;
    let k = d.output(rows, key_width)?;
    let v = d.output(rows, value_width)?;
    run(
        d,
        MslKernel::ConvQkvNorm,
        &[
            shape.n_k_head as u32,
            shape.k_dim as u32,
            shape.n_v_head as u32,
            shape.v_dim as u32,
            taps as u32,
            rows as u32,
            op.q_scale.to_bits(),
            op.eps.to_bits(),
        ],
        &[
            d.buffer(m),
            d.buffer(w),
            d.buffer(state),
            d.buffer(&q),
            d.buffer(&k),
            d.buffer(&v),
        ],
        2 * shape.n_k_head + shape.n_v_head,
        f32_bytes((rows + 2 * taps - 1) * channels),
    )?;
    Ok(Qkv { q, k, v })
}

/// `(g, β) = (ssm_a · softplus(alpha + dt_bias), sigmoid(beta))`, elementwise per head.
pub fn delta_net_gates<D: MslDevice + ?Sized>(
    d: &D,
    alpha: &D::Tensor,
    beta: &D::Tensor,
    ssm_a: &D::Tensor,
    dt_bias: &D::Tensor,
) -> Result<(D::Tensor, D::Tensor), BackendError> {
    let op = "delta_net_gates";
    same_dims(d, op, alpha, beta)?;
    same_dims(d, op, ssm_a, dt_bias)?;
    let (rows, heads) = d.dims(alpha);
    if d.dims(ssm_a) != (1, heads) {
        let (r, c) = d.dims(ssm_a);
        return Err(shape_error(
            op,
            format!("per-head parameters are {r}×{c} for {heads} heads"),
        ));
    }
    let g = d.output(rows, heads)?;
    let strength = d.output(rows, heads)?;
    let n = rows * heads;
    let kernel = MslKernel::DeltaNetGates;
    run(
        d,
        kernel,
        &[n as u32, heads as u32],
        &[
            d.buffer(alpha),
            d.buffer(beta),
            d.buffer(ssm_a),
            d.buffer(dt_bias),
            d.buffer(&g),
            d.buffer(&strength),
        ],
        groups_for(kernel, n),
        f32_bytes(2 * n + 2 * heads),
    )?;
    Ok((g, strength))
}

/// Largest k_dim the delta-rule kernel holds (`MAX_K_DIM` in delta_rule.metal).
const MAX_K_DIM: usize = 256;
/// State columns per threadgroup of the delta-rule kernel (`COLUMNS` in delta_rule.metal).
const DELTA_RULE_COLUMNS: usize = 32;

/// The gated delta rule token by token over the rows, per value head, on the f32 `state`
/// (one row of k_dim × v_dim per value head, key index major); returns o.
pub fn delta_rule<D: MslDevice + ?Sized>(
    d: &D,
    op: &DeltaRule<'_, D::Tensor>,
    state: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    let gates = DeltaRuleGates::Computed {
        g: op.g,
        beta: op.beta,
    };
    delta_rule_kernel(d, op.qkv, gates, state, op.shape)
}

/// [`delta_rule`] with its gates computed from the projections as [`delta_net_gates`] does, in
/// the same dispatch.
pub fn gated_delta_rule<D: MslDevice + ?Sized>(
    d: &D,
    rule: &GatedDeltaRule<'_, D::Tensor>,
    state: &D::Tensor,
) -> Result<D::Tensor, BackendError> {
    let op = "gated_delta_rule";
    same_dims(d, op, rule.ssm_a, rule.dt_bias)?;
    if d.dims(rule.ssm_a) != (1, rule.shape.n_v_head) {
        return Err(shape_error(
            op,
            format!(
                "per-head parameters are {:?} for {} value heads",
                d.dims(rule.ssm_a),
                rule.shape.n_v_head
            ),
        ));
    }
    let gates = DeltaRuleGates::Raw {
        alpha: rule.alpha,
        beta: rule.beta,
        ssm_a: rule.ssm_a,
        dt_bias: rule.dt_bias,
    };
    delta_rule_kernel(d, rule.qkv, gates, state, rule.shape)
}

fn delta_rule_kernel<D: MslDevice + ?Sized>(
    d: &D,
    qkv: &Qkv<D::Tensor>,
    gates: DeltaRuleGates<'_, D::Tensor>,
    state: &D::Tensor,
    shape: DeltaNetShape,
) -> Result<D::Tensor, BackendError> {
    let Qkv { q, k, v } = qkv;
    let ([g, beta], [ssm_a, dt_bias], raw) = gates.operands();
    let n = d.dims(q).0;
    checks::delta_rule(qkv, [g, beta], state, shape, |t| d.dims(t))
        .map_err(|e| shape_error("delta_rule", e))?;
    if shape.k_dim > MAX_K_DIM {
        return Err(shape_error(
            "delta_rule",
            format!(
                "k_dim {}: the kernel holds at most {MAX_K_DIM}",
                shape.k_dim
            ),
        ));
    }
    let out = d.output(n, shape.n_v_head * shape.v_dim)?;
    let column_tiles = shape.v_dim.div_ceil(DELTA_RULE_COLUMNS);
    run(
        d,
        MslKernel::DeltaRule,
        &[
            shape.n_k_head as u32,
            shape.n_v_head as u32,
            shape.k_dim as u32,
            shape.v_dim as u32,
            n as u32,
            column_tiles as u32,
            raw as u32,
        ],
        &[
            d.buffer(q),
            d.buffer(k),
            d.buffer(v),
            d.buffer(g),
            d.buffer(beta),
            d.buffer(state),
            d.buffer(&out),
            d.buffer(ssm_a),
            d.buffer(dt_bias),
        ],
        shape.n_v_head * column_tiles,
        f32_bytes(
            n * (2 * shape.n_k_head * shape.k_dim + shape.n_v_head * (shape.v_dim + 2))
                + len(d, state),
        ),
    )?;
    Ok(out)
}

/// The index of the largest value of a one-row `x` (lowest index on ties, NaN never wins),
/// as the exact f32 value of a 1×1 tensor.
pub fn argmax<D: MslDevice + ?Sized>(d: &D, x: &D::Tensor) -> Result<D::Tensor, BackendError> {
    let (rows, n) = d.dims(x);
    if rows != 1 || n == 0 || n >= MAX_VOCAB {
        return Err(shape_error(
            "argmax",
            format!("{rows}×{n} values, not one row of fewer than {MAX_VOCAB}"),
        ));
    }
    let out = d.output(1, 1)?;
    run(
        d,
        MslKernel::Argmax,
        &[n as u32],
        &[d.buffer(x), d.buffer(&out)],
        1,
        f32_bytes(n),
    )?;
    Ok(out)
}
