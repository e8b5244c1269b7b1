//! The MSL simulator checked on probe kernels: that it runs Metal semantics (vector types,
//! SIMD-group functions, barriers, threadgroup memory) and that it catches what it is there to
//! catch (missing barriers, divergent SIMD-group calls, too much threadgroup memory).

// The simulator's fiber switch is written for x86-64 and its loader for Linux.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod msl_sim;

use msl_sim::rewrite::{rewrite, swizzles};
use msl_sim::{DeviceBuffer, Order, Program};

fn program(name: &str, source: &str) -> std::sync::Arc<Program> {
    Program::build(name, source).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn rewriter_binds_parameters_and_keeps_lines() {
    let src = "kernel void add(device float* x [[buffer(1)]],\n  constant P& p [[buffer(0)]],\n  \
               uint i [[thread_position_in_grid]]) {\n  threadgroup float tile[32];\n  \
               x[i] += tile[0] * 1.5h;\n}\n";
    let out = rewrite(src).expect("rewrite");
    assert_eq!(out.kernels, vec!["add".to_string()]);
    assert!(out
        .cpp
        .contains("float* x = ::msl_sim::bind_buffer<float*>(1)"));
    assert!(out
        .cpp
        .contains("const P& p = ::msl_sim::bind_buffer<const P&>(0)"));
    assert!(out
        .cpp
        .contains("uint i = ::msl_sim::bind<uint>(::msl_sim::attribute::thread_position_in_grid)"));
    assert!(out
        .cpp
        .contains("auto& tile = ::msl_sim::threadgroup_variable<float[32]>(0);"));
    assert!(out.cpp.contains("((half)1.5f)"));
    // Same line as in the source, so compiler errors point at the right place.
    assert_eq!(out.cpp.lines().position(|l| l.contains("tile[0]")), Some(4));
}

#[test]
fn rewriter_refuses_what_it_cannot_bind() {
    for src in [
        "kernel void f(device float* x [[texture(0)]]) {}",
        "kernel void f(device float* x) {}",
        "kernel void f(uint i [[thread_position_in_grid]]) { threadgroup float a[2], b[2]; }",
    ] {
        assert!(rewrite(src).is_err(), "{src}");
    }
}

#[test]
fn swizzle_lists_cover_every_combination() {
    // Two letter sets, each with n² + n³ + n⁴ names.
    assert_eq!(swizzles(2).lines().count(), 2 * (4 + 8 + 16));
    assert_eq!(swizzles(4).lines().count(), 2 * (16 + 64 + 256));
    assert!(swizzles(3).contains("swizzle<T, S, 2, 1, 0> zyx;"));
}

const VECTORS: &str = r#"
#include <metal_stdlib>
using namespace metal;

struct Params { uint n; float scale; };

kernel void vectors(device const float4* x [[buffer(0)]],
                    device float* out [[buffer(1)]],
                    constant Params& p [[buffer(2)]],
                    device const packed_float3* packed [[buffer(3)]],
                    uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    float4 v = x[i];
    float4 w = v.wzyx * p.scale;
    w.xy = v.zw;
    w.zw += float2(1.0f, 2.0f);
    float3 t = float3(packed[i]);
    half4 h = half4(v);
    uint bits = as_type<uint>(v.x);
    float2 m = max(v.xy, v.zw) + min(v.xy, 0.0f);
    out[i * 12 + 0] = w.x;
    out[i * 12 + 1] = w.y;
    out[i * 12 + 2] = w.z;
    out[i * 12 + 3] = w.w;
    out[i * 12 + 4] = dot(v, w);
    out[i * 12 + 5] = t.x + t.y * 2.0f + t.z * 3.0f;
    out[i * 12 + 6] = float(h.y) + float(1.5h);
    out[i * 12 + 7] = as_type<float>(bits ^ 0x80000000u);
    out[i * 12 + 8] = m.x + m.y;
    out[i * 12 + 9] = fma(v.x, v.y, v.z) + select(1.0f, 2.0f, v.w > 0.0f);
    out[i * 12 + 10] = float(sizeof(float3) + sizeof(packed_float3));
    out[i * 12 + 11] = exp(v.x) + precise::sqrt(fabs(v.y)) + fast::exp2(v.z);
}
"#;

#[test]
fn vector_types_swizzles_and_conversions() {
    let prog = program("probe_vectors", VECTORS);
    let n = 37usize;
    let x: Vec<f32> = (0..4 * n).map(|k| (k as f32 * 0.37).sin() * 3.0).collect();
    let packed: Vec<f32> = (0..3 * n).map(|k| k as f32 * 0.5 - 7.0).collect();
    let scale = 1.25f32;
    let params: Vec<u32> = vec![n as u32, scale.to_bits()];
    for order in Order::BOTH {
        let bufs = [
            DeviceBuffer::from_f32(&x),
            DeviceBuffer::zeroed(12 * n * 4),
            DeviceBuffer::from_u32(&params),
            DeviceBuffer::from_f32(&packed),
        ];
        let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
        let counts = prog
            .dispatch("vectors", [2, 1, 1], [32, 1, 1], &refs, order)
            .expect("dispatch");
        counts.converged().expect("converged");
        let out = bufs[1].f32s();
        for i in 0..n {
            let v = &x[4 * i..4 * i + 4];
            let mut w = [v[3] * scale, v[2] * scale, v[1] * scale, v[0] * scale];
            w[0] = v[2];
            w[1] = v[3];
            w[2] += 1.0;
            w[3] += 2.0;
            let t = &packed[3 * i..3 * i + 3];
            let h = half::f16::from_f32(v[1]).to_f32();
            let m = [
                v[0].max(v[2]) + v[0].min(0.0),
                v[1].max(v[3]) + v[1].min(0.0),
            ];
            let expected = [
                w[0],
                w[1],
                w[2],
                w[3],
                v.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>(),
                t[0] + t[1] * 2.0 + t[2] * 3.0,
                h + 1.5,
                -v[0],
                m[0] + m[1],
                v[0].mul_add(v[1], v[2]) + if v[3] > 0.0 { 2.0 } else { 1.0 },
                (16 + 12) as f32,
                v[0].exp() + v[1].abs().sqrt() + v[2].exp2(),
            ];
            for (k, (&got, &want)) in out[12 * i..12 * i + 12].iter().zip(&expected).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{order:?} thread {i} value {k}: {got} vs {want}"
                );
            }
        }
    }
}

const SIMD: &str = r#"
#include <metal_stdlib>
using namespace metal;

kernel void simd_ops(device const float* x [[buffer(0)]],
                     device float* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]],
                     uint lane [[thread_index_in_simdgroup]]) {
    float v = x[i];
    out[i * 10 + 0] = simd_sum(v);
    out[i * 10 + 1] = simd_max(v);
    out[i * 10 + 2] = simd_shuffle_down(v, 3);
    out[i * 10 + 3] = simd_shuffle_up(v, 5);
    out[i * 10 + 4] = simd_shuffle_xor(v, 9);
    out[i * 10 + 5] = simd_broadcast(v, 7);
    out[i * 10 + 6] = simd_prefix_exclusive_sum(v);
    out[i * 10 + 7] = simd_prefix_inclusive_sum(v);
    out[i * 10 + 8] = float(simd_ballot(v > 0.0f).any()) + float(simd_all(v > -100.0f));
    out[i * 10 + 9] = simd_shuffle(v, (lane * 7) % 32) + float(simd_is_first());
}
"#;

#[test]
fn simd_group_functions() {
    let prog = program("probe_simd", SIMD);
    let threads = 64usize;
    let x: Vec<f32> = (0..threads).map(|k| ((k * 37 % 11) as f32) - 4.5).collect();
    for order in Order::BOTH {
        let bufs = [
            DeviceBuffer::from_f32(&x),
            DeviceBuffer::zeroed(threads * 10 * 4),
        ];
        let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
        let counts = prog
            .dispatch("simd_ops", [1, 1, 1], [threads as u32, 1, 1], &refs, order)
            .expect("dispatch");
        counts.converged().expect("converged");
        // simd_all is two calls (the votes and the voters).
        assert_eq!(counts.simd_calls, 2 * 13, "13 calls per SIMD-group");
        let out = bufs[1].f32s();
        for i in 0..threads {
            let (group, lane) = (i / 32 * 32, i % 32);
            let g = &x[group..group + 32];
            let prefix: f32 = g[..lane].iter().sum();
            let expected = [
                g.iter().sum::<f32>(),
                g.iter().copied().fold(f32::MIN, f32::max),
                g[if lane + 3 < 32 { lane + 3 } else { lane }],
                g[if lane >= 5 { lane - 5 } else { lane }],
                g[lane ^ 9],
                g[7],
                prefix,
                prefix + g[lane],
                1.0 + 1.0,
                g[lane * 7 % 32] + if lane == 0 { 1.0 } else { 0.0 },
            ];
            for (k, (&got, &want)) in out[10 * i..10 * i + 10].iter().zip(&expected).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-4,
                    "{order:?} thread {i} value {k}: {got} vs {want}"
                );
            }
        }
    }
}

const DIVERGENT: &str = r#"
#include <metal_stdlib>
using namespace metal;

kernel void two_branches(device float* out [[buffer(0)]],
                         uint i [[thread_position_in_grid]],
                         uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    float s;
    // The same call in both branches: one call per half, not one converged call.
    if (lane < 16) {
        s = simd_sum(v);
    } else {
        s = simd_sum(v);
    }
    out[i] = s;
}

kernel void uniform_branch(device float* out [[buffer(0)]],
                           uint i [[thread_position_in_grid]],
                           uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    out[i] = out[0] > 1e30f ? simd_max(v) : simd_sum(v);
}

// One call whose argument is chosen per lane: g++'s jump threading would copy the call into
// both arms of the choice.
kernel void chosen_argument(device float* out [[buffer(0)]],
                            uint i [[thread_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    out[i] = simd_max(lane % 3 == 0 ? -INFINITY : v);
}

kernel void early_return(device float* out [[buffer(0)]],
                         uint i [[thread_position_in_grid]]) {
    if (i % 32 == 31) {
        return;
    }
    out[i] = simd_sum(1.0f);
}
"#;

#[test]
fn divergent_simd_calls_are_counted() {
    let prog = program("probe_divergent", DIVERGENT);
    for order in Order::BOTH {
        let out = DeviceBuffer::zeroed(64 * 4);
        let counts = prog
            .dispatch("two_branches", [1, 1, 1], [64, 1, 1], &[&out], order)
            .expect("dispatch");
        assert_eq!(counts.divergent_simd_calls, 4, "{order:?}: {counts:?}");
        // Each half sums only its own lanes.
        let sums = out.f32s();
        assert_eq!(sums[0], (0..16).sum::<u32>() as f32);
        assert_eq!(sums[20], (16..32).sum::<u32>() as f32);

        let counts = prog
            .dispatch("uniform_branch", [1, 1, 1], [64, 1, 1], &[&out], order)
            .expect("dispatch");
        counts.converged().expect("a uniform branch is converged");
        assert_eq!(counts.simd_calls, 2);

        let counts = prog
            .dispatch("chosen_argument", [1, 1, 1], [64, 1, 1], &[&out], order)
            .expect("dispatch");
        counts.converged().expect("one call, whatever the argument");
        assert_eq!(out.f32s()[0], 31.0);

        let counts = prog
            .dispatch("early_return", [1, 1, 1], [64, 1, 1], &[&out], order)
            .expect("dispatch");
        assert_eq!(
            counts.divergent_simd_calls, 2,
            "returned lanes are missing from the call"
        );
        assert_eq!(out.f32s()[0], 31.0);
    }
}

const BARRIERS: &str = r#"
#include <metal_stdlib>
using namespace metal;

// Each thread reads its lower neighbour's value from threadgroup memory.
kernel void rotate(device const float* x [[buffer(0)]],
                   device float* out [[buffer(1)]],
                   constant uint& with_barrier [[buffer(2)]],
                   uint i [[thread_index_in_threadgroup]]) {
    threadgroup float shared[256];
    shared[i] = x[i];
    if (with_barrier != 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[i] = shared[i == 0 ? 0 : i - 1];
}

kernel void too_much(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
    threadgroup float big[8200];
    big[i] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[i] = big[0];
}

kernel void barrier_after_return(device float* out [[buffer(0)]],
                                 uint i [[thread_index_in_threadgroup]]) {
    threadgroup float shared[64];
    if (i == 5) {
        return;
    }
    shared[i] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[i] = shared[(i + 1) % 64];
}
"#;

#[test]
fn missing_barrier_is_caught_in_one_order() {
    let prog = program("probe_barriers", BARRIERS);
    let n = 200usize;
    let x: Vec<f32> = (0..n).map(|k| k as f32).collect();
    let expected: Vec<f32> = (0..n).map(|k| k.saturating_sub(1) as f32).collect();
    let mut wrong_orders = 0;
    for (_, out) in outputs_without_barrier(&prog, "rotate", &x, &expected, &Order::BOTH) {
        if out != expected {
            assert!(
                out.iter().any(|v| v.is_nan()),
                "poisoned memory shows as NaN"
            );
            wrong_orders += 1;
        }
    }
    // Forward order runs each writer before its reader; only the reverse order shows this race.
    assert_eq!(
        wrong_orders, 1,
        "the race shows in exactly one of the two orders"
    );
}

/// Runs `kernel(x, out, with_barrier)` as one threadgroup of `x.len()` threads in each order,
/// with its barrier (which must give `expected`) and without; returns the outputs without.
fn outputs_without_barrier(
    prog: &Program,
    kernel: &str,
    x: &[f32],
    expected: &[f32],
    orders: &[Order],
) -> Vec<(Order, Vec<f32>)> {
    let mut without = Vec::new();
    for with_barrier in [1u32, 0] {
        for &order in orders {
            let bufs = [
                DeviceBuffer::from_f32(x),
                DeviceBuffer::zeroed(x.len() * 4),
                DeviceBuffer::from_u32(&[with_barrier]),
            ];
            let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
            let counts = prog
                .dispatch(kernel, [1, 1, 1], [x.len() as u32, 1, 1], &refs, order)
                .expect("dispatch");
            counts.converged().expect("converged");
            let out = bufs[1].f32s();
            if with_barrier == 1 {
                assert_eq!(out, expected, "{order:?}");
            } else {
                without.push((order, out));
            }
        }
    }
    without
}

#[test]
fn threadgroup_memory_limit_and_barrier_divergence() {
    let prog = program("probe_barriers", BARRIERS);
    let out = DeviceBuffer::zeroed(64 * 4);
    let err = prog
        .dispatch("too_much", [1, 1, 1], [64, 1, 1], &[&out], Order::Forward)
        .expect_err("32,800 bytes of threadgroup memory");
    assert!(err.to_string().contains("exceeds 32 KiB"), "{err}");

    let counts = prog
        .dispatch(
            "barrier_after_return",
            [2, 1, 1],
            [64, 1, 1],
            &[&out],
            Order::Forward,
        )
        .expect("dispatch");
    assert_eq!(counts.divergent_barriers, 2, "{counts:?}");
    assert!(counts.converged().is_err());
}

#[test]
fn unbound_buffer_and_unknown_kernel_are_errors() {
    let prog = program("probe_barriers", BARRIERS);
    let err = prog
        .dispatch("too_much", [1, 1, 1], [64, 1, 1], &[], Order::Forward)
        .expect_err("no buffers");
    assert!(err.to_string().contains("[[buffer(0)]]"), "{err}");
    assert!(prog
        .dispatch("nope", [1, 1, 1], [1, 1, 1], &[], Order::Forward)
        .is_err());
}

#[test]
fn compile_errors_point_into_the_metal_source() {
    let source = "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void broken(device float* x [[buffer(0)]]) {\n    x[0] = undefined_name;\n}\n";
    let err = Program::build("probe_broken", source)
        .err()
        .expect("does not compile");
    let text = err.to_string();
    assert!(text.contains(".metal:5"), "{text}");
}

const SIMD_SPLIT: &str = r#"
#include <metal_stdlib>
using namespace metal;

// Each thread reads the value a thread of the next SIMD-group wrote. The SIMD-group sum between
// the write and the read orders only the writer's own SIMD-group, not the others.
kernel void read_next_simdgroup(device const float* x [[buffer(0)]],
                                device float* out [[buffer(1)]],
                                constant uint& with_barrier [[buffer(2)]],
                                uint i [[thread_index_in_threadgroup]],
                                uint n [[threads_per_threadgroup]]) {
    threadgroup float shared[256];
    shared[i] = x[i];
    float total = simd_sum(x[i]);
    if (with_barrier != 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[i] = total + shared[(i + 32) % n];
}
"#;

#[test]
fn race_split_only_by_a_simd_reduction_is_caught() {
    let prog = program("probe_simd_split", SIMD_SPLIT);
    let n = 128usize;
    let x: Vec<f32> = (0..n).map(|k| (k % 7) as f32).collect();
    let expected: Vec<f32> = (0..n)
        .map(|i| x[i / 32 * 32..i / 32 * 32 + 32].iter().sum::<f32>() + x[(i + 32) % n])
        .collect();
    let orders = Order::schedules(2);
    for (order, out) in
        outputs_without_barrier(&prog, "read_next_simdgroup", &x, &expected, &orders)
    {
        if matches!(order, Order::Forward | Order::Reverse) {
            // The SIMD-group whose sum completes first runs on to its read before the
            // SIMD-group it reads from has written.
            assert!(
                out.iter().any(|v| v.is_nan()),
                "{order:?}: the race went unseen"
            );
        }
    }
}

const INACTIVE_LANES: &str = r#"
#include <metal_stdlib>
using namespace metal;

// Lanes 0-15 shuffle down by 8: lanes 8-15 read lanes 16-23, which are not in the branch.
kernel void shuffle_in_half(device const float* x [[buffer(0)]],
                            device float* out [[buffer(1)]],
                            uint i [[thread_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]]) {
    float v = x[i];
    if (lane < 16) {
        v = simd_shuffle_down(v, 8);
    }
    out[i] = v;
}
"#;

#[test]
fn reads_from_inactive_lanes_are_poisoned() {
    let prog = program("probe_inactive_lanes", INACTIVE_LANES);
    // 48 threads: the second SIMD-group has 16 lanes, so its lanes 8-15 read lanes that do not
    // exist, as the first SIMD-group's read lanes outside the branch.
    let n = 48usize;
    let x: Vec<f32> = (0..n).map(|k| k as f32).collect();
    for order in Order::schedules(1) {
        let bufs = [DeviceBuffer::from_f32(&x), DeviceBuffer::zeroed(n * 4)];
        let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
        let counts = prog
            .dispatch("shuffle_in_half", [1, 1, 1], [n as u32, 1, 1], &refs, order)
            .expect("dispatch");
        assert_eq!(counts.divergent_simd_calls, 1, "{order:?}: {counts:?}");
        let out = bufs[1].f32s();
        for (i, &got) in out.iter().enumerate() {
            let lane = i % 32;
            match lane {
                0..=7 => assert_eq!(got, x[i + 8], "{order:?} thread {i}"),
                8..=15 => assert!(
                    got.is_nan(),
                    "{order:?} thread {i}: {got} from an inactive lane"
                ),
                _ => assert_eq!(got, x[i], "{order:?} thread {i}"),
            }
        }
    }
}

const NAN_RULES: &str = r#"
#include <metal_stdlib>
using namespace metal;

kernel void nan_rules(device const float* x [[buffer(0)]],
                      device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    float v = x[i];
    out[i * 6 + 0] = max(v, 0.0f);
    out[i * 6 + 1] = min(v, 0.0f);
    out[i * 6 + 2] = clamp(v, -1.0f, 1.0f);
    out[i * 6 + 3] = fmax(v, 0.0f) + fmin(v, 0.0f);
    out[i * 6 + 4] = precise::max(v, 0.0f);
    out[i * 6 + 5] = simd_max(v) + simd_min(v);
}
"#;

/// max/min/clamp (fast:: under Metal's default fast math) have no defined result for a NaN
/// operand: NaN here. fmax/fmin and precise::max drop it, as documented. simd_max/simd_min
/// follow max.
#[test]
fn nan_rules_of_max_min_and_simd_max() {
    let prog = program("probe_nan_rules", NAN_RULES);
    let n = 64usize;
    // SIMD-group 0 holds a NaN at lane 3; SIMD-group 1 none.
    let x: Vec<f32> = (0..n)
        .map(|k| {
            if k == 3 {
                f32::NAN
            } else {
                k as f32 * 0.25 - 4.0
            }
        })
        .collect();
    let out_buf = DeviceBuffer::zeroed(n * 6 * 4);
    let x_buf = DeviceBuffer::from_f32(&x);
    prog.dispatch(
        "nan_rules",
        [1, 1, 1],
        [n as u32, 1, 1],
        &[&x_buf, &out_buf],
        Order::Forward,
    )
    .expect("dispatch");
    let out = out_buf.f32s();
    let nan = &out[3 * 6..4 * 6];
    assert!(
        nan[0].is_nan() && nan[1].is_nan() && nan[2].is_nan(),
        "{nan:?}"
    );
    assert_eq!(
        &nan[3..5],
        &[0.0, 0.0],
        "fmax/fmin and precise::max drop NaN"
    );
    for i in 0..n {
        let row = &out[i * 6..i * 6 + 6];
        if i < 32 {
            assert!(row[5].is_nan(), "thread {i}: simd_max over a NaN lane");
        } else {
            let g = &x[32..64];
            let want = g.iter().copied().fold(f32::MIN, f32::max)
                + g.iter().copied().fold(f32::MAX, f32::min);
            assert_eq!(row[5], want, "thread {i}");
        }
        if i != 3 {
            let v = x[i];
            assert_eq!(row[0], v.max(0.0), "thread {i}");
            assert_eq!(row[2], v.clamp(-1.0, 1.0), "thread {i}");
        }
    }
}

const LOST_UPDATE: &str = r#"
#include <metal_stdlib>
using namespace metal;

// Every thread adds one to a threadgroup counter without an atomic: between one thread's read
// and its write another thread may read the same value.
kernel void count_threads(device uint* out [[buffer(0)]],
                          uint i [[thread_index_in_threadgroup]]) {
    threadgroup uint counter[1];
    if (i == 0) {
        counter[0] = 0;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint seen = counter[0];
    counter[0] = seen + 1;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (i == 0) {
        out[0] = counter[0];
    }
}
"#;

#[test]
fn race_between_barriers_is_caught_by_random_interleavings() {
    let prog = program("probe_lost_update", LOST_UPDATE);
    let threads = 64u32;
    for order in Order::schedules(4) {
        let out = DeviceBuffer::zeroed(4);
        let counts = prog
            .dispatch("count_threads", [1, 1, 1], [threads, 1, 1], &[&out], order)
            .expect("dispatch");
        counts.converged().expect("converged");
        let count = out.u32s()[0];
        if let Order::Random(_) = order {
            assert!(counts.interleavings > 0, "{order:?}: {counts:?}");
            assert!(count < threads, "{order:?}: no update lost ({count})");
        } else {
            // Threads switch only where they wait: each read-and-write runs undisturbed.
            assert_eq!(count, threads, "{order:?}");
            assert_eq!(counts.interleavings, 0, "{order:?}");
        }
    }
}
