//! Every MSL kernel, executed by the MSL simulator through the GPU backend's own MSL launch code
//! (qwen35::backend::gpu::msl_ops), against the CPU reference on random inputs at awkward sizes:
//! in both fixed thread orders and in RANDOM_SCHEDULES seeded random interleavings (switching
//! threads at memory accesses too; MSL_SIM_SCHEDULES=n runs n instead), with divergent
//! SIMD-group calls and barriers failing the dispatch and threadgroup memory held to 32 KiB (see
//! msl_sim/device.rs).

// The simulator's fiber switch is written for x86-64 and its loader for Linux.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod msl_sim;

use half::f16;
use msl_sim::device::{SimDevice, SimTensor};
use msl_sim::Order;
use qwen35::backend::cpu::{CpuBackend, CpuTensor};
use qwen35::backend::gpu::msl_kernels::MslFormat;
use qwen35::backend::gpu::msl_ops as ops;
use qwen35::backend::gpu::Storage;
use qwen35::backend::{
    AttentionShape, Backend, ConvQkvNorm, DeltaNetShape, DeltaRule, GatedAttention, GatedDeltaRule,
    KvCache, Qkv, RopeShape,
};
use qwen35::compare::{compare_elements, Tolerance};
use qwen35::model::forward::{conv_qkv_norm_steps, gated_attention_steps, gated_delta_rule_steps};
use qwen35::quant::{self, GgmlType};

/// xorshift64*: reproducible inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        (self.bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.bits() as u8).collect()
    }
}

fn cpu() -> CpuBackend {
    CpuBackend::new(1).expect("cpu pool")
}

fn cpu_tensor(cpu: &CpuBackend, rows: usize, cols: usize, values: &[f32]) -> CpuTensor {
    cpu.upload(rows, cols, values).expect("upload")
}

fn cpu_values(cpu: &CpuBackend, x: &CpuTensor) -> Vec<f32> {
    cpu.read_rows(x, 0, usize::MAX)
}

/// Random interleavings per test case unless MSL_SIM_SCHEDULES says otherwise.
const RANDOM_SCHEDULES: u64 = 2;

/// Each schedule on a fresh simulated device.
fn in_each_schedule(test: impl Fn(&SimDevice)) {
    for order in Order::schedules(Order::random_schedules(RANDOM_SCHEDULES)) {
        test(&SimDevice::new(order));
    }
}

/// Close to the reference elementwise (relative to its largest value) and in direction.
fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_close_within(what, got, want, 1e-4);
}

/// Both ways a KV cache is stored.
const CACHE_STORAGES: [Storage; 2] = [Storage::F16, Storage::F32];

/// What attention over a cache stored as `storage` may differ from the f32 reference by, as a
/// share of the output's largest value: in f16 each cached key and value is rounded (2⁻¹¹ of
/// itself; tests/wgpu_ops.rs measures the WGSL kernels' F16KvCache at 1.4e-3).
fn attention_share(storage: Storage) -> f32 {
    match storage {
        Storage::F32 => 1e-4,
        Storage::F16 => 3e-3,
    }
}

/// `values` as a cache stored as `storage` holds them (f16 rounds to nearest, as the simulator's
/// conversions do).
fn stored(values: &[f32], storage: Storage) -> Vec<f32> {
    match storage {
        Storage::F32 => values.to_vec(),
        Storage::F16 => values.iter().map(|&x| f16::from_f32(x).to_f32()).collect(),
    }
}

/// [`assert_close`] within `share` of the reference's largest value.
fn assert_close_within(what: &str, got: &[f32], want: &[f32], share: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        scale > 0.0,
        "{what}: reference is all zeros, the test cannot fail"
    );
    // The MSL kernels compute in f32 like the CPU ops; a bound relative to the output's largest
    // value allows for their different summation orders.
    let tolerance = Tolerance {
        atol: share * scale,
        rtol: 0.0,
    };
    let comparison = compare_elements(got, want, tolerance);
    assert!(
        comparison.passes() && comparison.cosine >= 0.99999,
        "{what}: {comparison}"
    );
}

/// A weight of `rows × cols` in `ty`: its file bytes (random but well-scaled blocks for the
/// formats without a quantizer here).
fn weight_bytes(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows {
        match ty {
            GgmlType::Q5_0 | GgmlType::Q5_K => {
                let block_bytes = ty.block_bytes();
                for _ in 0..cols / ty.block_elems() {
                    let mut block = rng.bytes(block_bytes);
                    // Scales first (d, and dmin for Q5_K): small positive halves.
                    let scales = if ty == GgmlType::Q5_K { 2 } else { 1 };
                    for s in 0..scales {
                        let d = f16::from_f32(0.01 + 0.02 * rng.next().abs());
                        block[2 * s..2 * s + 2].copy_from_slice(&d.to_le_bytes());
                    }
                    bytes.extend(block);
                }
            }
            _ => quant::quantize_row(ty, &rng.vec(cols), &mut bytes).expect("quantize"),
        }
    }
    bytes
}

fn reference_matvec(ty: GgmlType, bytes: &[u8], rows: usize, x: &[f32]) -> Vec<f32> {
    let row_bytes = bytes.len() / rows;
    bytes
        .chunks_exact(row_bytes)
        .map(|row| quant::dot_row(ty, row, x).expect("dot_row"))
        .collect()
}

#[test]
fn gemv_every_format_against_dot_row() {
    let cases: &[(MslFormat, &[usize])] = &[
        (MslFormat::F32, &[300, 301]),
        (MslFormat::F16, &[300, 301]),
        (MslFormat::Q8_0, &[416]),
        (MslFormat::Q5_0, &[416]),
        (MslFormat::Q4_K, &[768, 1280]),
        (MslFormat::Q5_K, &[768]),
        (MslFormat::Q6_K, &[768, 1280]),
    ];
    let mut rng = Rng::new(1);
    let rows = 45;
    for &(format, widths) in cases {
        let ty = format.ggml_type();
        for &cols in widths {
            let bytes = weight_bytes(&mut rng, ty, rows, cols);
            for tokens in [1, 3] {
                let x = rng.vec(tokens * cols);
                let want: Vec<f32> = x
                    .chunks_exact(cols)
                    .flat_map(|xt| reference_matvec(ty, &bytes, rows, xt))
                    .collect();
                for max_part_rows in [rows, 16] {
                    in_each_schedule(|sim| {
                        let w = sim.weight("w", ty, rows, cols, &bytes, max_part_rows);
                        let xs = sim.tensor(tokens, cols, &x);
                        let y = ops::matmul(sim, &xs, &w).expect("matmul");
                        assert_close(
                            &format!("{format:?} {rows}×{cols}, {tokens} tokens, parts of {max_part_rows}, {:?}", sim.order),
                            &y.values(),
                            &want,
                        );
                    });
                }
            }
        }
    }
}

#[test]
fn embed_every_format_against_dequantize() {
    let mut rng = Rng::new(2);
    let rows = 11;
    for format in MslFormat::ALL {
        let ty = format.ggml_type();
        let cols = if ty.block_elems() == 256 { 512 } else { 96 };
        let bytes = weight_bytes(&mut rng, ty, rows, cols);
        let row_bytes = bytes.len() / rows;
        let tokens = [3u32, 0, 10, 7];
        let want: Vec<f32> = tokens
            .iter()
            .flat_map(|&t| {
                let row = &bytes[t as usize * row_bytes..(t as usize + 1) * row_bytes];
                quant::dequantize(ty, row, cols).expect("dequantize")
            })
            .collect();
        in_each_schedule(|sim| {
            let w = sim.weight("table", ty, rows, cols, &bytes, 4);
            let out = ops::embed(sim, &w, &tokens).expect("embed");
            assert_close(&format!("embed {format:?}"), &out.values(), &want);
            assert!(
                ops::embed(sim, &w, &[rows as u32]).is_err(),
                "token out of range"
            );
        });
    }
}

#[test]
fn norms_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(3);
    // (rows, groups, group): the model's norm, per-head q/k norms, and an awkward width.
    for (rows, groups, group) in [(1, 1, 333), (1, 5, 70), (2, 3, 1100)] {
        let cols = groups * group;
        let x = rng.vec(rows * cols);
        let z = rng.vec(rows * cols);
        let w = rng.vec(group);
        let eps = 1e-6;
        let (cx, cz, cw) = (
            cpu_tensor(&cpu, rows, cols, &x),
            cpu_tensor(&cpu, rows, cols, &z),
            cpu_tensor(&cpu, 1, group, &w),
        );
        let rms = cpu_values(&cpu, &cpu.rms_norm(&cx, &cw, eps).expect("cpu"));
        let gated = cpu_values(&cpu, &cpu.gated_rms_norm(&cx, &cz, &cw, eps).expect("cpu"));
        let l2 = cpu_values(&cpu, &cpu.l2_norm(&cx, group, 0.25, eps).expect("cpu"));
        in_each_schedule(|sim| {
            let (sx, sz, sw) = (
                sim.tensor(rows, cols, &x),
                sim.tensor(rows, cols, &z),
                sim.tensor(1, group, &w),
            );
            let what = format!("{rows}×{groups}×{group} {:?}", sim.order);
            let out = ops::rms_norm(sim, &sx, &sw, eps).expect("rms_norm");
            assert_close(&format!("rms_norm {what}"), &out.values(), &rms);
            let out = ops::gated_rms_norm(sim, &sx, &sz, &sw, eps).expect("gated");
            assert_close(&format!("gated_rms_norm {what}"), &out.values(), &gated);
            let out = ops::l2_norm(sim, &sx, group, 0.25, eps).expect("l2_norm");
            assert_close(&format!("l2_norm {what}"), &out.values(), &l2);
        });
    }
}

#[test]
fn elementwise_ops_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(4);
    let (rows, cols) = (3, 333);
    let a = rng
        .vec(rows * cols)
        .iter()
        .map(|v| v * 6.0)
        .collect::<Vec<_>>();
    let b = rng.vec(rows * cols);
    let (ca, cb) = (
        cpu_tensor(&cpu, rows, cols, &a),
        cpu_tensor(&cpu, rows, cols, &b),
    );
    let swiglu = cpu_values(&cpu, &cpu.swiglu(&ca, &cb).expect("cpu"));
    let gate = cpu_values(&cpu, &cpu.sigmoid_mul(&cb, &ca).expect("cpu"));
    let mut sum = cpu_tensor(&cpu, rows, cols, &a);
    cpu.add(&mut sum, &cb).expect("cpu");
    let sum = cpu_values(&cpu, &sum);
    let slice = cpu_values(&cpu, &cpu.slice_cols(&ca, 111, 40, 66).expect("cpu"));
    let picked = cpu_values(&cpu, &cpu.rows(&ca, 1, 2).expect("cpu"));
    in_each_schedule(|sim| {
        let (sa, sb) = (sim.tensor(rows, cols, &a), sim.tensor(rows, cols, &b));
        let order = sim.order;
        let out = ops::swiglu(sim, &sa, &sb).expect("swiglu");
        assert_close(&format!("swiglu {order:?}"), &out.values(), &swiglu);
        let out = ops::sigmoid_mul(sim, &sb, &sa).expect("sigmoid_mul");
        assert_close(&format!("sigmoid_mul {order:?}"), &out.values(), &gate);
        let out = ops::slice_cols(sim, &sa, 111, 40, 66).expect("slice_cols");
        assert_close(&format!("slice_cols {order:?}"), &out.values(), &slice);
        let out = ops::rows(sim, &sa, 1, 2).expect("rows");
        assert_close(&format!("rows {order:?}"), &out.values(), &picked);
        ops::add(sim, &sa, &sb).expect("add");
        assert_close(&format!("add {order:?}"), &sa.values(), &sum);
    });
}

#[test]
fn rope_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(5);
    for (rows, heads, head_dim, rot, pos0) in [(1, 4, 64, 16, 1234), (3, 3, 40, 40, 7)] {
        let cols = heads * head_dim;
        let x = rng.vec(rows * cols);
        let want = cpu_values(
            &cpu,
            &cpu.rope(&cpu_tensor(&cpu, rows, cols, &x), head_dim, rot, 1e7, pos0)
                .expect("cpu"),
        );
        in_each_schedule(|sim| {
            let out = ops::rope(sim, &sim.tensor(rows, cols, &x), head_dim, rot, 1e7, pos0)
                .expect("rope");
            assert_close(
                &format!("rope hd {head_dim} {:?}", sim.order),
                &out.values(),
                &want,
            );
        });
    }
}

#[test]
fn attention_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(6);
    // (n_head, n_kv_head, head_dim, pos0): the fixture's shape, awkward ones, and contexts of
    // several cache blocks (128 rows), the last one partly filled.
    let rows = 1;
    for (n_head, n_kv_head, head_dim, pos0) in [
        (4, 2, 64, 13),
        (6, 2, 40, 9),
        (2, 2, 256, 0),
        (8, 1, 96, 70),
        (4, 2, 64, 300),
    ] {
        let shape = AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        };
        let ctx = pos0 + rows + 2;
        let kv_cols = n_kv_head * head_dim;
        let q = rng.vec(rows * n_head * head_dim);
        let k = rng.vec(rows * kv_cols);
        let v = rng.vec(rows * kv_cols);
        // Rows past the filled ones are never read.
        let mut cache_k = rng.vec(ctx * kv_cols);
        let mut cache_v = rng.vec(ctx * kv_cols);
        cache_k[(pos0 + rows) * kv_cols..].fill(0.0);
        cache_v[(pos0 + rows) * kv_cols..].fill(0.0);
        let mut ck = cpu_tensor(&cpu, ctx, kv_cols, &cache_k);
        let mut cv = cpu_tensor(&cpu, ctx, kv_cols, &cache_v);
        let want = cpu
            .attention(
                &cpu_tensor(&cpu, rows, n_head * head_dim, &q),
                &cpu_tensor(&cpu, rows, kv_cols, &k),
                &cpu_tensor(&cpu, rows, kv_cols, &v),
                &mut KvCache {
                    k: &mut ck,
                    v: &mut cv,
                    pos0,
                },
                shape,
            )
            .expect("cpu");
        let (want, want_k, want_v) = (
            cpu_values(&cpu, &want),
            cpu_values(&cpu, &ck),
            cpu_values(&cpu, &cv),
        );
        in_each_schedule(|sim| {
            for storage in CACHE_STORAGES {
                let (mut sk, mut sv) = (
                    sim.cache(ctx, kv_cols, &cache_k, storage),
                    sim.cache(ctx, kv_cols, &cache_v, storage),
                );
                let out = ops::attention(
                    sim,
                    &sim.tensor(rows, n_head * head_dim, &q),
                    &sim.tensor(rows, kv_cols, &k),
                    &sim.tensor(rows, kv_cols, &v),
                    &KvCache {
                        k: &mut sk,
                        v: &mut sv,
                        pos0,
                    },
                    shape,
                )
                .expect("attention");
                let what = format!(
                    "{shape:?} rows {rows} at {pos0} {:?}, {storage:?} cache",
                    sim.order
                );
                let share = attention_share(storage);
                assert_close_within(&format!("attention {what}"), &out.values(), &want, share);
                assert_eq!(sk.values(), stored(&want_k, storage), "k cache {what}");
                assert_eq!(sv.values(), stored(&want_v, storage), "v cache {what}");
            }
        });
    }
}

#[test]
fn gated_delta_net_ops_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(7);
    for (rows, channels, taps) in [(1, 300, 4), (3, 70, 4), (2, 33, 2)] {
        let x = rng.vec(rows * channels);
        let w = rng.vec(channels * taps);
        let state = rng.vec((taps - 1) * channels);
        let mut cs = cpu_tensor(&cpu, taps - 1, channels, &state);
        let want = cpu
            .conv1d_silu(
                &cpu_tensor(&cpu, rows, channels, &x),
                &cpu_tensor(&cpu, channels, taps, &w),
                &mut cs,
            )
            .expect("cpu");
        let (want, want_state) = (cpu_values(&cpu, &want), cpu_values(&cpu, &cs));
        in_each_schedule(|sim| {
            let ss = sim.tensor(taps - 1, channels, &state);
            let out = ops::conv1d_silu(
                sim,
                &sim.tensor(rows, channels, &x),
                &sim.tensor(channels, taps, &w),
                &ss,
            )
            .expect("conv1d_silu");
            let what = format!("conv {rows}×{channels}×{taps} {:?}", sim.order);
            assert_close(&what, &out.values(), &want);
            assert_eq!(ss.values(), want_state, "{what}: state");
        });
    }

    for (rows, heads) in [(1, 8), (3, 13)] {
        // Wide inputs reach both sides of softplus's cut-over at 20.
        let alpha: Vec<f32> = rng.vec(rows * heads).iter().map(|v| v * 30.0).collect();
        let beta: Vec<f32> = rng.vec(rows * heads).iter().map(|v| v * 8.0).collect();
        let ssm_a: Vec<f32> = rng.vec(heads).iter().map(|v| -1.0 - v.abs()).collect();
        let dt_bias = rng.vec(heads);
        let (g, b) = cpu
            .delta_net_gates(
                &cpu_tensor(&cpu, rows, heads, &alpha),
                &cpu_tensor(&cpu, rows, heads, &beta),
                &cpu_tensor(&cpu, 1, heads, &ssm_a),
                &cpu_tensor(&cpu, 1, heads, &dt_bias),
            )
            .expect("cpu");
        let (g, b) = (cpu_values(&cpu, &g), cpu_values(&cpu, &b));
        in_each_schedule(|sim| {
            let (sg, sb) = ops::delta_net_gates(
                sim,
                &sim.tensor(rows, heads, &alpha),
                &sim.tensor(rows, heads, &beta),
                &sim.tensor(1, heads, &ssm_a),
                &sim.tensor(1, heads, &dt_bias),
            )
            .expect("gates");
            assert_close(&format!("decay {:?}", sim.order), &sg.values(), &g);
            assert_close(&format!("beta {:?}", sim.order), &sb.values(), &b);
        });
    }

    // (n_k_head, n_v_head, k_dim, v_dim, rows): the fixture's shape, a 27B-like head, and
    // sizes that are no multiple of the kernel's 32 columns or 8 key slices.
    for (n_k_head, n_v_head, k_dim, v_dim, rows) in
        [(4, 8, 32, 32, 1), (1, 2, 128, 128, 1), (2, 6, 43, 45, 2)]
    {
        let shape = DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        };
        // Unit-length keys as after the L2 norm, decays and strengths in their real ranges.
        let unit = |rng: &mut Rng, n: usize| {
            let mut v = rng.vec(n);
            for head in v.chunks_exact_mut(k_dim) {
                let len = head.iter().map(|x| x * x).sum::<f32>().sqrt();
                head.iter_mut().for_each(|x| *x /= len);
            }
            v
        };
        let q = unit(&mut rng, rows * n_k_head * k_dim);
        let k = unit(&mut rng, rows * n_k_head * k_dim);
        let v = rng.vec(rows * n_v_head * v_dim);
        let g: Vec<f32> = rng.vec(rows * n_v_head).iter().map(|x| -x.abs()).collect();
        let beta: Vec<f32> = rng.vec(rows * n_v_head).iter().map(|x| x.abs()).collect();
        let state = rng.vec(n_v_head * k_dim * v_dim);
        let mut cs = cpu_tensor(&cpu, n_v_head, k_dim * v_dim, &state);
        let want = cpu
            .delta_rule(
                &DeltaRule {
                    qkv: &Qkv {
                        q: cpu_tensor(&cpu, rows, n_k_head * k_dim, &q),
                        k: cpu_tensor(&cpu, rows, n_k_head * k_dim, &k),
                        v: cpu_tensor(&cpu, rows, n_v_head * v_dim, &v),
                    },
                    g: &cpu_tensor(&cpu, rows, n_v_head, &g),
                    beta: &cpu_tensor(&cpu, rows, n_v_head, &beta),
                    shape,
                },
                &mut cs,
            )
            .expect("cpu");
        let (want, want_state) = (cpu_values(&cpu, &want), cpu_values(&cpu, &cs));
        in_each_schedule(|sim| {
            let ss = sim.tensor(n_v_head, k_dim * v_dim, &state);
            let out = ops::delta_rule(
                sim,
                &DeltaRule {
                    qkv: &Qkv {
                        q: sim.tensor(rows, n_k_head * k_dim, &q),
                        k: sim.tensor(rows, n_k_head * k_dim, &k),
                        v: sim.tensor(rows, n_v_head * v_dim, &v),
                    },
                    g: &sim.tensor(rows, n_v_head, &g),
                    beta: &sim.tensor(rows, n_v_head, &beta),
                    shape,
                },
                &ss,
            )
            .expect("delta_rule");
            let what = format!("delta_rule {shape:?} rows {rows} {:?}", sim.order);
            assert_close(&what, &out.values(), &want);
            assert_close(&format!("{what}: state"), &ss.values(), &want_state);
        });
    }
}

#[test]
fn argmax_against_the_sampler() {
    let mut rng = Rng::new(8);
    let mut cases: Vec<Vec<f32>> = vec![rng.vec(1000), rng.vec(5), vec![f32::NAN; 7]];
    // Ties (the lowest index wins), NaN (never wins) and -inf.
    let mut tied = rng.vec(3000);
    tied[2999] = 5.0;
    tied[1500] = 5.0;
    tied[700] = 5.0;
    tied[10] = f32::NAN;
    cases.push(tied);
    cases.push(vec![f32::NEG_INFINITY, f32::NAN, f32::NEG_INFINITY]);
    for values in &cases {
        let want = qwen35::sample::argmax(values);
        in_each_schedule(|sim| {
            let out = ops::argmax(sim, &sim.tensor(1, values.len(), values)).expect("argmax");
            let got = out.values()[0];
            assert_eq!(got, want as f32, "{} values, {:?}", values.len(), sim.order);
        });
    }
}

#[test]
fn converged_launches_use_little_threadgroup_memory() {
    let mut rng = Rng::new(9);
    let sim = SimDevice::new(Order::Forward);
    let shape = AttentionShape {
        n_head: 2,
        n_kv_head: 1,
        head_dim: 256,
    };
    let t =
        |rows, cols, rng: &mut Rng| -> SimTensor { sim.tensor(rows, cols, &rng.vec(rows * cols)) };
    let (q, k, v) = (
        t(1, 512, &mut rng),
        t(1, 256, &mut rng),
        t(1, 256, &mut rng),
    );
    let (mut kc, mut vc) = (t(4, 256, &mut rng), t(4, 256, &mut rng));
    let cache = KvCache {
        k: &mut kc,
        v: &mut vc,
        pos0: 2,
    };
    ops::attention(&sim, &q, &k, &v, &cache, shape).expect("attention");
    let stats = sim.stats();
    assert!(stats.max_threadgroup_bytes > 8 * 1024, "{stats:?}");
    assert!(stats.max_threadgroup_bytes <= 32 * 1024, "{stats:?}");
    assert!(stats.barriers > 0 && stats.simd_calls > 0, "{stats:?}");
}

#[test]
fn fused_gemvs_against_matvec_and_add() {
    let cpu = cpu();
    let mut rng = Rng::new(10);
    let rows = 45;
    for format in MslFormat::ALL {
        let ty = format.ggml_type();
        let cols = if ty.block_elems() == 256 { 768 } else { 416 };
        let bytes = weight_bytes(&mut rng, ty, rows, cols);
        // Gates wide enough to reach SiLU's both tails.
        let gate: Vec<f32> = rng.vec(cols).iter().map(|v| v * 6.0).collect();
        let up = rng.vec(cols);
        let acc = rng.vec(rows);
        let product = cpu_values(
            &cpu,
            &cpu.swiglu(
                &cpu_tensor(&cpu, 1, cols, &gate),
                &cpu_tensor(&cpu, 1, cols, &up),
            )
            .expect("cpu"),
        );
        let plus = |y: Vec<f32>| -> Vec<f32> { y.iter().zip(&acc).map(|(y, a)| a + y).collect() };
        let want_add = plus(reference_matvec(ty, &bytes, rows, &up));
        let want_swiglu = plus(reference_matvec(ty, &bytes, rows, &product));
        in_each_schedule(|sim| {
            let w = sim.weight("w", ty, rows, cols, &bytes, 16);
            let what = format!("{format:?} {rows}×{cols} {:?}", sim.order);
            let sums = sim.tensor(1, rows, &acc);
            ops::matmul_add(sim, &sim.tensor(1, cols, &up), &w, &sums).expect("matmul_add");
            assert_close(&format!("matmul_add {what}"), &sums.values(), &want_add);
            let sums = sim.tensor(1, rows, &acc);
            let (sg, su) = (sim.tensor(1, cols, &gate), sim.tensor(1, cols, &up));
            ops::swiglu_matmul_add(sim, &sg, &su, &w, &sums).expect("swiglu_matmul_add");
            assert_close(
                &format!("swiglu_matmul_add {what}"),
                &sums.values(),
                &want_swiglu,
            );
            let wrong = sim.tensor(1, rows + 1, &vec![0.0; rows + 1]);
            assert!(
                ops::matmul_add(sim, &su, &w, &wrong).is_err(),
                "{what}: shape"
            );
        });
    }
}

#[test]
fn normed_gemv_against_rms_norm_then_matvec() {
    let cpu = cpu();
    let mut rng = Rng::new(12);
    let rows = 45;
    let eps = 1e-6;
    for format in MslFormat::ALL {
        let ty = format.ggml_type();
        // The float formats also at a width that is no multiple of 4 (their scalar loop).
        let widths: &[usize] = match ty.block_elems() {
            256 => &[768, 1280],
            32 => &[416],
            _ => &[300, 301],
        };
        for &cols in widths {
            let bytes = weight_bytes(&mut rng, ty, rows, cols);
            for tokens in [1, 3] {
                // Far from unit RMS, so that a missing or wrong factor shows.
                let x: Vec<f32> = rng.vec(tokens * cols).iter().map(|v| v * 5.0).collect();
                let norm = rng.vec(cols);
                let normed = cpu_values(
                    &cpu,
                    &cpu.rms_norm(
                        &cpu_tensor(&cpu, tokens, cols, &x),
                        &cpu_tensor(&cpu, 1, cols, &norm),
                        eps,
                    )
                    .expect("cpu"),
                );
                let want: Vec<f32> = normed
                    .chunks_exact(cols)
                    .flat_map(|row| reference_matvec(ty, &bytes, rows, row))
                    .collect();
                in_each_schedule(|sim| {
                    let w = sim.weight("w", ty, rows, cols, &bytes, 16);
                    let (sx, sn) = (sim.tensor(tokens, cols, &x), sim.tensor(1, cols, &norm));
                    sim.take_dispatches();
                    let y = ops::rms_norm_matmul(sim, &sx, &sn, eps, &w).expect("rms_norm_matmul");
                    let what =
                        format!("{format:?} {rows}×{cols}, {tokens} tokens, {:?}", sim.order);
                    assert_close(&what, &y.values(), &want);
                    // One GEMV per weight part (16 rows each), no norm dispatch.
                    assert_eq!(sim.take_dispatches(), rows.div_ceil(16) as u64, "{what}");
                });
            }
        }
    }
}

#[test]
fn normed_gemv_over_groups_is_the_norm_then_the_gemv() {
    let cpu = cpu();
    let mut rng = Rng::new(13);
    let (rows, cols, group) = (20, 256, 64);
    let bytes = weight_bytes(&mut rng, GgmlType::Q8_0, rows, cols);
    let x = rng.vec(cols);
    let norm = rng.vec(group);
    let normed = cpu_values(
        &cpu,
        &cpu.rms_norm(
            &cpu_tensor(&cpu, 1, cols, &x),
            &cpu_tensor(&cpu, 1, group, &norm),
            1e-6,
        )
        .expect("cpu"),
    );
    let want = reference_matvec(GgmlType::Q8_0, &bytes, rows, &normed);
    let sim = SimDevice::new(Order::Forward);
    let w = sim.weight("w", GgmlType::Q8_0, rows, cols, &bytes, rows);
    let (sx, sn) = (sim.tensor(1, cols, &x), sim.tensor(1, group, &norm));
    let y = ops::rms_norm_matmul(&sim, &sx, &sn, 1e-6, &w).expect("rms_norm_matmul");
    assert_close("per-group norm", &y.values(), &want);
    let stats = sim.stats();
    assert_eq!(stats.by_kernel.get("rms_norm"), Some(&1), "{stats:?}");
    assert_eq!(stats.by_kernel.get("gemv_q8_0"), Some(&1), "{stats:?}");
    let odd = sim.tensor(1, 100, &vec![1.0; 100]);
    assert!(ops::rms_norm_matmul(&sim, &sx, &odd, 1e-6, &w).is_err());
}

#[test]
fn embed_ids_from_argmax_against_dequantize() {
    let mut rng = Rng::new(11);
    let (rows, cols) = (37, 96);
    for format in [MslFormat::Q8_0, MslFormat::F32] {
        let ty = format.ggml_type();
        let bytes = weight_bytes(&mut rng, ty, rows, cols);
        let row_bytes = bytes.len() / rows;
        for token in [0usize, 17, 36] {
            let want =
                quant::dequantize(ty, &bytes[token * row_bytes..(token + 1) * row_bytes], cols)
                    .expect("dequantize");
            let mut logits = rng.vec(rows);
            logits[token] = 2.0;
            in_each_schedule(|sim| {
                // Parts of 10 rows: the id's row is in one part, the others write nothing.
                let w = sim.weight("table", ty, rows, cols, &bytes, 10);
                let ids = ops::argmax(sim, &sim.tensor(1, rows, &logits)).expect("argmax");
                let out = ops::embed_ids(sim, &w, &ids).expect("embed_ids");
                let what = format!("embed_ids {format:?} token {token} {:?}", sim.order);
                assert_close(&what, &out.values(), &want);
            });
        }
    }
}

#[test]
fn gated_attention_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(12);
    // (n_head, n_kv_head, head_dim, rope dims, pos0): the fixture's shape, a full-width rotation,
    // none, and a context of several cache blocks.
    for (n_head, n_kv_head, head_dim, rot, pos0) in [
        (4, 2, 64, 16, 13),
        (6, 3, 40, 40, 0),
        (2, 1, 256, 0, 5),
        (4, 2, 64, 16, 260),
    ] {
        let shape = AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        };
        let rope = RopeShape {
            dims: rot,
            base: 1e7,
        };
        let eps = 1e-6;
        let ctx = pos0 + 3;
        let kv_cols = n_kv_head * head_dim;
        let q_and_gate: Vec<f32> = rng
            .vec(2 * n_head * head_dim)
            .iter()
            .map(|v| v * 3.0)
            .collect();
        let k = rng.vec(kv_cols);
        let v = rng.vec(kv_cols);
        let (q_norm, k_norm) = (rng.vec(head_dim), rng.vec(head_dim));
        let mut cache_k = rng.vec(ctx * kv_cols);
        let mut cache_v = rng.vec(ctx * kv_cols);
        cache_k[(pos0 + 1) * kv_cols..].fill(0.0);
        cache_v[(pos0 + 1) * kv_cols..].fill(0.0);
        let mut ck = cpu_tensor(&cpu, ctx, kv_cols, &cache_k);
        let mut cv = cpu_tensor(&cpu, ctx, kv_cols, &cache_v);
        let want = gated_attention_steps(
            &cpu,
            &GatedAttention {
                q_and_gate: &cpu_tensor(&cpu, 1, 2 * n_head * head_dim, &q_and_gate),
                k: &cpu_tensor(&cpu, 1, kv_cols, &k),
                v: &cpu_tensor(&cpu, 1, kv_cols, &v),
                q_norm: &cpu_tensor(&cpu, 1, head_dim, &q_norm),
                k_norm: &cpu_tensor(&cpu, 1, head_dim, &k_norm),
                eps,
                rope,
                shape,
            },
            &mut KvCache {
                k: &mut ck,
                v: &mut cv,
                pos0,
            },
        )
        .expect("cpu");
        let (want, want_k, want_v) = (
            cpu_values(&cpu, &want),
            cpu_values(&cpu, &ck),
            cpu_values(&cpu, &cv),
        );
        in_each_schedule(|sim| {
            for storage in CACHE_STORAGES {
                let (mut sk, mut sv) = (
                    sim.cache(ctx, kv_cols, &cache_k, storage),
                    sim.cache(ctx, kv_cols, &cache_v, storage),
                );
                let out = ops::gated_attention(
                    sim,
                    &GatedAttention {
                        q_and_gate: &sim.tensor(1, 2 * n_head * head_dim, &q_and_gate),
                        k: &sim.tensor(1, kv_cols, &k),
                        v: &sim.tensor(1, kv_cols, &v),
                        q_norm: &sim.tensor(1, head_dim, &q_norm),
                        k_norm: &sim.tensor(1, head_dim, &k_norm),
                        eps,
                        rope,
                        shape,
                    },
                    &KvCache {
                        k: &mut sk,
                        v: &mut sv,
                        pos0,
                    },
                )
                .expect("gated_attention");
                let what = format!(
                    "gated_attention {shape:?} rope {rot} at {pos0} {:?}, {storage:?} cache",
                    sim.order
                );
                let share = attention_share(storage);
                assert_close_within(&what, &out.values(), &want, share);
                // The new k row is rotated on both sides, in different orders.
                assert_close_within(
                    &format!("{what}: k cache"),
                    &sk.values(),
                    &stored(&want_k, storage),
                    share,
                );
                assert_eq!(sv.values(), stored(&want_v, storage), "{what}: v cache");
            }
        });
    }
}

#[test]
fn conv_qkv_norm_and_gated_delta_rule_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(13);
    // (n_k_head, n_v_head, k_dim, v_dim, taps): the fixture's shape, a 27B-like head, heads
    // wider than the 256 threads, and awkward sizes.
    for (n_k_head, n_v_head, k_dim, v_dim, taps) in [
        (4, 8, 32, 32, 4),
        (1, 2, 128, 128, 4),
        (1, 1, 256, 520, 4),
        (2, 6, 43, 45, 2),
    ] {
        let shape = DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        };
        let [want_q, want_k, want_v] = conv_qkv_norm_against_cpu(&cpu, &mut rng, 1, shape, taps);

        // Gates from raw projections across softplus's cut-over at 20.
        let alpha: Vec<f32> = rng.vec(n_v_head).iter().map(|v| v * 30.0).collect();
        let beta: Vec<f32> = rng.vec(n_v_head).iter().map(|v| v * 8.0).collect();
        let ssm_a: Vec<f32> = rng
            .vec(n_v_head)
            .iter()
            .map(|v| -0.05 - 0.1 * v.abs())
            .collect();
        let dt_bias = rng.vec(n_v_head);
        let state = rng.vec(n_v_head * k_dim * v_dim);
        let mut ds = cpu_tensor(&cpu, n_v_head, k_dim * v_dim, &state);
        let o = gated_delta_rule_steps(
            &cpu,
            &GatedDeltaRule {
                qkv: &Qkv {
                    q: cpu_tensor(&cpu, 1, n_k_head * k_dim, &want_q),
                    k: cpu_tensor(&cpu, 1, n_k_head * k_dim, &want_k),
                    v: cpu_tensor(&cpu, 1, n_v_head * v_dim, &want_v),
                },
                alpha: &cpu_tensor(&cpu, 1, n_v_head, &alpha),
                beta: &cpu_tensor(&cpu, 1, n_v_head, &beta),
                ssm_a: &cpu_tensor(&cpu, 1, n_v_head, &ssm_a),
                dt_bias: &cpu_tensor(&cpu, 1, n_v_head, &dt_bias),
                shape,
            },
            &mut ds,
        )
        .expect("cpu");
        let (want_o, want_state) = (cpu_values(&cpu, &o), cpu_values(&cpu, &ds));

        in_each_schedule(|sim| {
            let what = format!("{shape:?} {:?}", sim.order);
            // The delta rule on the CPU's q, k, v, so that only the rule is compared.
            let sd = sim.tensor(n_v_head, k_dim * v_dim, &state);
            let out = ops::gated_delta_rule(
                sim,
                &GatedDeltaRule {
                    qkv: &Qkv {
                        q: sim.tensor(1, n_k_head * k_dim, &want_q),
                        k: sim.tensor(1, n_k_head * k_dim, &want_k),
                        v: sim.tensor(1, n_v_head * v_dim, &want_v),
                    },
                    alpha: &sim.tensor(1, n_v_head, &alpha),
                    beta: &sim.tensor(1, n_v_head, &beta),
                    ssm_a: &sim.tensor(1, n_v_head, &ssm_a),
                    dt_bias: &sim.tensor(1, n_v_head, &dt_bias),
                    shape,
                },
                &sd,
            )
            .expect("gated_delta_rule");
            assert_close(&format!("gated_delta_rule {what}"), &out.values(), &want_o);
            assert_close(
                &format!("gated_delta_rule state {what}"),
                &sd.values(),
                &want_state,
            );
        });
    }
}

/// conv_qkv_norm of `rows` random rows (and a random carried state) in each schedule against
/// the CPU's: q, k, v and the new state. Returns the CPU's q, k and v.
fn conv_qkv_norm_against_cpu(
    cpu: &CpuBackend,
    rng: &mut Rng,
    rows: usize,
    shape: DeltaNetShape,
    taps: usize,
) -> [Vec<f32>; 3] {
    let key_width = shape.n_k_head * shape.k_dim;
    let channels = 2 * key_width + shape.n_v_head * shape.v_dim;
    let (q_scale, eps) = (1.0 / (shape.k_dim as f32).sqrt(), 1e-6);
    let m = rng.vec(rows * channels);
    let w = rng.vec(channels * taps);
    let conv_state = rng.vec((taps - 1) * channels);
    let mut cs = cpu_tensor(cpu, taps - 1, channels, &conv_state);
    let Qkv { q, k, v } = conv_qkv_norm_steps(
        cpu,
        &ConvQkvNorm {
            m: &cpu_tensor(cpu, rows, channels, &m),
            w: &cpu_tensor(cpu, channels, taps, &w),
            shape,
            q_scale,
            eps,
        },
        &mut cs,
    )
    .expect("cpu");
    let want = [q, k, v].map(|x| cpu_values(cpu, &x));
    let want_state = cpu_values(cpu, &cs);
    in_each_schedule(|sim| {
        let what = format!("{rows} rows of {shape:?} taps {taps} {:?}", sim.order);
        let ss = sim.tensor(taps - 1, channels, &conv_state);
        let qkv = ops::conv_qkv_norm(
            sim,
            &ConvQkvNorm {
                m: &sim.tensor(rows, channels, &m),
                w: &sim.tensor(channels, taps, &w),
                shape,
                q_scale,
                eps,
            },
            &ss,
        )
        .expect("conv_qkv_norm");
        for (name, got, want) in [
            ("q", qkv.q, &want[0]),
            ("k", qkv.k, &want[1]),
            ("v", qkv.v, &want[2]),
        ] {
            assert_close(&format!("conv_qkv_norm {name} {what}"), &got.values(), want);
        }
        assert_eq!(ss.values(), want_state, "conv state {what}");
    });
    want
}

#[test]
fn conv_qkv_norm_over_several_rows_against_cpu() {
    let cpu = cpu();
    let mut rng = Rng::new(14);
    // (rows, n_k_head, n_v_head, k_dim, v_dim, taps): more rows than carried inputs, and fewer.
    for (rows, n_k_head, n_v_head, k_dim, v_dim, taps) in [
        (5, 2, 6, 43, 45, 4),
        (2, 4, 8, 32, 32, 4),
        (3, 1, 1, 256, 520, 2),
    ] {
        let shape = DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        };
        conv_qkv_norm_against_cpu(&cpu, &mut rng, rows, shape, taps);
    }
}
