// y_m = W_m · x for up to four weights of one format and width that project the same token
// (q, k and v of a layer; its gate and up; the delta net's four input projections): one dispatch
// instead of one per weight, with the row groups of all the weights in one grid, so that a
// small projection runs beside the large ones instead of as a dispatch of its own. The span
// reader reads weight m through `weight(i)`. Unused weight slots repeat the first weight and
// unused outputs the first output; neither is touched.

struct Params {
    cols: u32,
    row_bytes: u32,
    tasks: u32,
    count: u32,
    rows: vec4<u32>,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> w0: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y0: array<f32>;
@group(0) @binding(4) var<storage, read> w1: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> w2: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read> w3: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> y1: array<f32>;
@group(0) @binding(8) var<storage, read_write> y2: array<f32>;
@group(0) @binding(9) var<storage, read_write> y3: array<f32>;

// The weight this workgroup multiplies (the same in all its invocations).
var<private> matrix: u32;

fn weight(i: u32) -> vec4<u32> {
    switch matrix {
        case 1u: {
            return w1[i];
        }
        case 2u: {
            return w2[i];
        }
        case 3u: {
            return w3[i];
        }
        default: {
            return w0[i];
        }
    }
}

fn store(i: u32, value: f32) {
    switch matrix {
        case 1u: {
            y1[i] = value;
        }
        case 2u: {
            y2[i] = value;
        }
        case 3u: {
            y3[i] = value;
        }
        default: {
            y0[i] = value;
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    lane: Lane,
) {
    // The weights' row groups follow each other in the grid.
    let group_rows = ROWS * (WG / PART);
    var group = workgroup_index(wid, nwg);
    var m = 0u;
    loop {
        let groups = (p.rows[m] + group_rows - 1u) / group_rows;
        if (group < groups || m + 1u >= p.count) {
            break;
        }
        group -= groups;
        m++;
    }
    matrix = m;
    let rows = p.rows[m];
    if (group * group_rows >= rows) {
        return;
    }
    let first = group * group_rows + part_of(lane) * ROWS;
    let totals = rows_dot(first, rows, p.row_bytes, input_row(0u, p.cols), p.tasks, lane);
    let r = part_lane(lane);
    if (r < ROWS && first + r < rows) {
        store(first + r, totals[r]);
    }
}
