// The repeat penalty, in place: each id of `recent` (exact f32 ids, negative where empty) that no
// earlier slot holds has its logit divided by the penalty where positive, else multiplied
// (sample.rs `apply_repeat_penalty`). One workgroup.

struct Params {
    cols: u32,
    window: u32,
    penalty: f32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> recent: array<f32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var slot = lid; slot < p.window; slot += WG) {
        let id = recent[slot];
        if (id < 0.0 || u32(id) >= p.cols) {
            continue;
        }
        var first = true;
        for (var earlier = 0u; earlier < slot; earlier++) {
            if (recent[earlier] == id) {
                first = false;
            }
        }
        if (first) {
            let l = logits[u32(id)];
            logits[u32(id)] = select(l * p.penalty, l / p.penalty, l > 0.0);
        }
    }
}
