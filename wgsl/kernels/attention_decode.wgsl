// Decode attention (one query row) past a short cache, as flash decoding: one workgroup per kv
// head, run of up to HEADS query heads of its GQA group, and split of the cache rows, so that
// every key and value row is loaded once for all the query heads it serves. Each split writes its
// heads' max m, Σ exp(s − m) and Σ exp(s − m)·v in attention_blocks.wgsl's layout, for
// attention_combine.wgsl to merge (and gate). Short caches take the per-head kernels
// (attention_blocks.wgsl): a workgroup per kv head is too few workgroups to fill a GPU there.
//
// The workgroup is TEAMS teams of TEAM lanes of one subgroup (the host makes TEAM the device's
// fixed subgroup size, at most 32, and builds this kernel only where it is a power of two of at
// least 8). A team takes every TEAMS-th row of the split, UNROLL rows a step: lane t holds vec4s
// t, t + TEAM, … of each key and value row, so that a team's loads of a row are one coalesced
// run; a score is a sum over the team's lanes by shuffles, and each team keeps its own online
// softmax in registers, so the loop over rows has no barrier. The teams' softmaxes are merged
// through workgroup memory at the end.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    pos0: u32,
    kv_cols: u32,
    // Cache rows per split (the last may have fewer), and splits.
    split_rows: u32,
    splits: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<KvQuad>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<KvQuad>;
// Per (head, split): max, sum and head_dim weighted-value sums.
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Query heads per workgroup: the largest GQA group of the Qwen3.5 and 3.6 models (the 27B's 24
// query heads over 4 kv heads); a larger group takes several workgroups per kv head.
const HEADS: u32 = 6u;
// vec4s of the widest head (head_dim 256, the host's limit), and of them each lane's.
const MAX_LANES: u32 = 64u;
const PER_LANE: u32 = MAX_LANES / TEAM;
const TEAMS: u32 = WG / TEAM;
// Rows a team loads before it uses the first, so that their loads are in flight together.
const UNROLL: u32 = 2u;
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> q_heads: array<vec4<f32>, HEADS * MAX_LANES>;
// Each team's max and sum per head, then each team's weighted sums of one head at a time.
var<workgroup> team_stats: array<vec2<f32>, TEAMS * HEADS>;
var<workgroup> team_sums: array<vec4<f32>, TEAMS * MAX_LANES>;

// The sum of x over the TEAM lanes of a team, in every one of them.
fn team_sum(x: f32) -> f32 {
    var total = x;
    for (var offset = 1u; offset < TEAM; offset <<= 1u) {
        total += subgroupShuffleXor(total, offset);
    }
    return total;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    let id = workgroup_index(wid, nwg);
    let group = p.n_head / p.n_kv_head;
    let runs = (group + HEADS - 1u) / HEADS;
    let split = id % p.splits;
    let run = (id / p.splits) % runs;
    let kv_head = id / p.splits / runs;
    if (kv_head >= p.n_kv_head) {
        return;
    }
    let first_head = kv_head * group + run * HEADS;
    let heads = min(HEADS, group - run * HEADS);
    let lanes = p.head_dim / 4u;
    let kv_base = kv_head * lanes;
    if (split == 0u && run == 0u) {
        for (var i = lid; i < lanes; i += WG) {
            append_kv(kv_base + i);
        }
    }
    for (var i = lid; i < HEADS * MAX_LANES; i += WG) {
        let h = i / MAX_LANES;
        let lane = i % MAX_LANES;
        var q_part = vec4<f32>(0.0);
        if (h < heads && lane < lanes) {
            q_part = q[(first_head + h) * lanes + lane];
        }
        q_heads[i] = q_part;
    }
    workgroupBarrier();

    let team = sg_id * (sg_size / TEAM) + sg_lane / TEAM;
    let t = sg_lane % TEAM;
    let first = split * p.split_rows;
    let end = min(first + p.split_rows, p.pos0 + 1u);
    var running_max: array<f32, HEADS>;
    var sums: array<f32, HEADS>;
    var acc: array<vec4<f32>, HEADS * PER_LANE>;
    for (var h = 0u; h < HEADS; h++) {
        running_max[h] = NEG_HUGE;
        sums[h] = 0.0;
    }
    for (var i = 0u; i < HEADS * PER_LANE; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    // Every team steps through the same number of rounds (a uniform loop); rows past the
    // split's end are loaded as its last row and weigh nothing.
    for (var round = first; round < end; round += TEAMS * UNROLL) {
        var keys: array<vec4<f32>, UNROLL * PER_LANE>;
        var values: array<vec4<f32>, UNROLL * PER_LANE>;
        for (var u = 0u; u < UNROLL; u++) {
            let row = min(round + u * TEAMS + team, end - 1u);
            for (var i = 0u; i < PER_LANE; i++) {
                let lane = min(t + i * TEAM, lanes - 1u);
                keys[u * PER_LANE + i] = key_at(row, kv_base + lane);
                values[u * PER_LANE + i] = value_at(row, kv_base + lane);
            }
        }
        for (var u = 0u; u < UNROLL; u++) {
            let live = round + u * TEAMS + team < end;
            for (var h = 0u; h < HEADS; h++) {
                if (h < heads) {
                    var part = 0.0;
                    for (var i = 0u; i < PER_LANE; i++) {
                        let lane = t + i * TEAM;
                        if (lane < lanes) {
                            part += dot(q_heads[h * MAX_LANES + lane], keys[u * PER_LANE + i]);
                        }
                    }
                    let score = team_sum(part) * p.scale;
                    let new_max = select(running_max[h], max(running_max[h], score), live);
                    let correction = exp(running_max[h] - new_max);
                    let weight = select(0.0, exp(score - new_max), live);
                    running_max[h] = new_max;
                    sums[h] = sums[h] * correction + weight;
                    for (var i = 0u; i < PER_LANE; i++) {
                        let a = h * PER_LANE + i;
                        acc[a] = acc[a] * correction + weight * values[u * PER_LANE + i];
                    }
                }
            }
        }
    }

    // The teams' softmaxes as one: each team's share scaled by exp(m_team − m).
    if (t == 0u) {
        for (var h = 0u; h < HEADS; h++) {
            team_stats[team * HEADS + h] = vec2<f32>(running_max[h], sums[h]);
        }
    }
    workgroupBarrier();
    for (var h = 0u; h < HEADS; h++) {
        if (h < heads) {
            var overall = NEG_HUGE;
            for (var other = 0u; other < TEAMS; other++) {
                overall = max(overall, team_stats[other * HEADS + h].x);
            }
            let factor = exp(running_max[h] - overall);
            for (var i = 0u; i < PER_LANE; i++) {
                team_sums[team * MAX_LANES + t + i * TEAM] = acc[h * PER_LANE + i] * factor;
            }
            workgroupBarrier();
            let at = ((first_head + h) * p.splits + split) * (2u + p.head_dim) + 2u;
            for (var lane = lid; lane < lanes; lane += WG) {
                var o = vec4<f32>(0.0);
                for (var other = 0u; other < TEAMS; other++) {
                    o += team_sums[other * MAX_LANES + lane];
                }
                out[at + 4u * lane] = o.x;
                out[at + 4u * lane + 1u] = o.y;
                out[at + 4u * lane + 2u] = o.z;
                out[at + 4u * lane + 3u] = o.w;
            }
            if (lid == 0u) {
                var total = 0.0;
                for (var other = 0u; other < TEAMS; other++) {
                    let stats = team_stats[other * HEADS + h];
                    total += stats.y * exp(stats.x - overall);
                }
                out[at - 2u] = overall;
                out[at - 1u] = total;
            }
            // The sums are read before the next head's overwrite them.
            workgroupBarrier();
        }
    }
}
