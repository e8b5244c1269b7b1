// cos and sin of position · inverse frequency, the angle reduced to [−π, π] in two steps so that
// large positions keep their accuracy: 2π split into a head exact in few bits and the rest
// (Cody–Waite).
const TWO_PI_HEAD: f32 = 6.28125;
const TWO_PI_TAIL: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

fn rotation(pos: f32, inv_freq: f32) -> vec2<f32> {
    let angle = pos * inv_freq;
    let turns = round(angle * INV_TWO_PI);
    let reduced = (angle - turns * TWO_PI_HEAD) - turns * TWO_PI_TAIL;
    return vec2<f32>(cos(reduced), sin(reduced));
}
