//! The human-readable rendering of a report: one row per backend, the notes that say what the
//! numbers are, and with `--profile` one table per backend and phase.

use super::ladder::STAGES;
use super::{
    BackendRun, GemmReport, GemvReport, GemvTiming, LadderStep, OpProfile, PeakSource, Report,
    Spread,
};
use crate::units::{bytes, count};

/// The report as text for a terminal.
pub fn render_table(report: &Report) -> String {
    let mut out = String::new();
    let banner = report
        .invalid
        .as_ref()
        .map(|why| format!("INVALID: {why}\n"));
    if let Some(banner) = &banner {
        out.push_str(banner);
    }
    out.push_str(&format!(
        "model: {} ({}), {}\nweights read per decode token: {} (run layers + output matrix + one embedding row)\n\n",
        report.model,
        bytes(report.file_bytes),
        count(report.threads, "thread"),
        bytes(report.weight_bytes_per_token),
    ));

    let columns_of_prefill = report.prefill_columns();
    let common_decode = report.common_decode_tokens();
    let mut header: Vec<String> = vec!["backend".into(), "load s".into()];
    header.extend(columns_of_prefill.iter().map(|p| format!("pp{p} tok/s")));
    header.extend([
        common_decode.map_or("tg tok/s".into(), |n| format!("tg{n} tok/s")),
        "ms/tok".into(),
        "eff. GB/s".into(),
        "of peak".into(),
        "disp/tok".into(),
        "submits/tok".into(),
        "peak RSS (process)".into(),
    ]);
    let mut rows = vec![header];
    // `qwen35 run`'s decode under the backends' rows, in the tg column.
    let mut run_rows = Vec::new();
    let mut notes = Vec::new();
    for backend in &report.backends {
        match (&backend.run, &backend.error) {
            (Some(run), _) => {
                rows.push(backend_row(&backend.backend, run, &columns_of_prefill));
                for at in &run.decode_at_depth {
                    let mut row = vec![format!(
                        "{} tg{} @ d{}",
                        backend.backend, at.tokens, at.depth
                    )];
                    row.resize(2 + columns_of_prefill.len(), String::new());
                    row.extend([spread(at.tok_per_s), spread(at.ms_per_token)]);
                    rows.push(row);
                }
                for path in &run.run_path {
                    let mut row = vec![format!("{} run {}", backend.backend, path.flags)];
                    row.resize(2 + columns_of_prefill.len(), String::new());
                    row.push(spread(path.tok_per_s));
                    run_rows.push(row);
                }
                notes.push(peak_note(&backend.backend, run));
                if common_decode.is_none() {
                    notes.push(format!(
                        "{}: decode over {}",
                        backend.backend,
                        count(run.decode.tokens, "token")
                    ));
                }
            }
            (None, error) => notes.push(format!(
                "{}: not run: {}",
                backend.backend,
                error.as_deref().unwrap_or("unknown error")
            )),
        }
    }
    rows.extend(run_rows);
    out.push_str(&columns(&rows));
    out.push('\n');
    if rows.iter().flatten().any(|cell| cell == NOT_RUN) {
        notes.push(format!(
            "{NOT_RUN}: a prompt size that backend did not run (--cpu-prompt)"
        ));
    }
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out.push_str(&format!(
        "tok/s and ms/tok: median [min..max] of {}; prefill from an empty state, decode greedy after a 16-token prompt (argmax on the backend, each step queued before the previous token is read).\n\
         BACKEND run FLAGS: decode tok/s of `qwen35 run FLAGS` (its loop, src/generate.rs: --temp 0.7 is top-k 20, top-p 0.8, seed 1, drawn on the backend) after a 16-token prompt.\n\
         peak RSS: the whole process's high-water mark (VmHWM) while each backend ran; GPU memory is not in it.\n\
         disp/tok, submits/tok: counted on the timed decode runs (the CPU, which counts only while profiling: on a separate profiled pass).\n",
        count(report.repeats, "run")
    ));

    if !report.depths.is_empty() {
        out.push_str(
            "BACKEND tgN @ dD: decode after a D-token prompt, prefilled once (untimed); every run starts from a snapshot of that state.\n",
        );
    }
    for backend in &report.backends {
        if let Some(profile) = backend.run.as_ref().and_then(|r| r.profile.as_ref()) {
            for (phase, ops) in [("prefill", &profile.prefill), ("decode", &profile.decode)] {
                out.push_str(&format!(
                    "\n{}",
                    profile_table(&backend.backend, phase, ops)
                ));
            }
        }
    }
    for backend in &report.backends {
        if let Some(steps) = backend.run.as_ref().and_then(|r| r.ladder.as_ref()) {
            out.push_str(&format!("\n{}", ladder_table(&backend.backend, steps)));
        }
    }
    if let Some(banner) = &banner {
        out.push('\n');
        out.push_str(banner);
    }
    out
}

/// One row per prompt size: each rung's median rate and wall time, then the full prefill's
/// profiled time by stage, as shares.
fn ladder_table(backend: &str, steps: &[LadderStep]) -> String {
    let mut header = vec!["P".to_string()];
    for rung in ["0 full", "1 skip gdn", "2 skip attn", "3 skip both"] {
        header.extend([format!("{rung} tok/s"), "ms".into()]);
    }
    header.extend(STAGES.map(|stage| format!("{} %", stage.replace('_', " "))));
    let mut rows = vec![header];
    for step in steps {
        let mut row = vec![step.tokens.to_string()];
        for rung in &step.rungs {
            row.extend([number(rung.tok_per_s.median), number(rung.ms.median)]);
        }
        let full = step
            .rungs
            .first()
            .map(|r| &r.stages[..])
            .unwrap_or_default();
        let total: f64 = full.iter().filter_map(|s| s.ms).sum();
        row.extend(full.iter().map(|stage| match stage.ms {
            Some(ms) if total > 0.0 => format!("{:.1}", 100.0 * ms / total),
            _ => "n/a".into(),
        }));
        rows.push(row);
    }
    format!(
        "prefill ladder {backend} (medians; rung N leaves out the token mixing of the layers it names, keeping their projections and MLP):\n{}\
         stage shares: of rung 0's profiled prefill, per-op times (GPU timestamps inflate small ops); n/a: the backend timed no op (no timestamps inside passes).\n",
        columns(&rows)
    )
}

/// The cell of a prompt size a backend did not run.
const NOT_RUN: &str = "-";

fn backend_row(name: &str, run: &BackendRun, prefill_columns: &[usize]) -> Vec<String> {
    let mut row = vec![name.to_string(), format!("{:.2}", run.load_seconds)];
    row.extend(
        prefill_columns
            .iter()
            .map(|&tokens| run.prefill_at(tokens).map_or(NOT_RUN.into(), spread)),
    );
    row.extend([
        spread(run.decode.tok_per_s),
        spread(run.decode.ms_per_token),
        number(run.effective_gbps),
        run.share_of_peak
            .map_or("peak unknown".into(), |s| format!("{:.0}%", s * 100.0)),
        run.dispatches_per_token
            .map_or("n/a".into(), |d| format!("{d:.0}")),
        run.submits_per_token
            .map_or("n/a".into(), |s| format!("{s:.0}")),
        run.process_peak_rss_bytes.map_or("n/a".into(), bytes),
    ]);
    row
}

fn peak_note(name: &str, run: &BackendRun) -> String {
    let ceiling = run
        .decode_ceiling_tok_per_s
        .map(|c| format!(", decode ceiling {} tok/s", number(c)))
        .unwrap_or_default();
    match (run.peak.gbps, run.peak.source) {
        (Some(gbps), PeakSource::Probe) => format!(
            "{name}: peak {} GB/s (streaming-read probe on the CPU){ceiling}",
            number(gbps)
        ),
        (Some(gbps), _) => format!("{name}: peak {} GB/s (--peak-gbps){ceiling}", number(gbps)),
        (None, _) => format!("{name}: peak unknown (pass --peak-gbps to compare)"),
    }
}

fn profile_table(backend: &str, phase: &str, profile: &OpProfile) -> String {
    let mut rows = vec![["op class", "ms", "%", "calls", "ms/call", "GB/s"]
        .map(String::from)
        .to_vec()];
    for op in &profile.ops {
        rows.push(vec![
            op.class.clone(),
            format!("{:.3}", op.ms),
            format!("{:.1}", op.percent),
            op.calls.to_string(),
            format!("{:.4}", op.ms_per_call),
            format!("{:.2}", op.gbps),
        ]);
    }
    let body = if profile.ops.is_empty() {
        "(the backend reported no op timings)\n".to_string()
    } else {
        columns(&rows)
    };
    format!(
        "profile {backend}, {phase} ({}):\n{body}",
        count(profile.tokens, "token")
    )
}

/// `v` to at least two decimals and three significant digits, so that a slow run on a loaded
/// machine (the floor's bandwidth can be 0.004 GB/s) does not print as zero.
fn three_significant(v: f64) -> String {
    let decimals = if v > 0.0 && v < 1.0 {
        (2.0 - v.log10().floor()) as usize
    } else {
        2
    };
    format!("{v:.decimals$}")
}

/// The GEMV microbenchmark as text.
pub fn render_gemv(report: &GemvReport) -> String {
    let line = |what: &str, t: &GemvTiming| {
        vec![
            what.to_string(),
            t.gemvs.to_string(),
            format!("{:.1}", t.us_per_gemv),
            three_significant(t.gbps),
        ]
    };
    let rows = vec![
        ["", "GEMVs", "µs/GEMV", "GB/s"].map(String::from).to_vec(),
        line("one per call (wait each)", &report.one_per_call),
        line("back to back (wait once)", &report.back_to_back),
        line("256×256 floor, one per call", &report.floor),
    ];
    format!(
        "gemv {}: {}×{} {} ({})\n{}",
        report.backend,
        report.rows,
        report.cols,
        report.ty,
        bytes(report.weight_bytes),
        columns(&rows)
    )
}

pub fn render_gemm(report: &GemmReport) -> String {
    let mut rows = vec![["weight", "P", "ms/GEMM", "TFLOP/s"]
        .map(String::from)
        .to_vec()];
    rows.extend(report.results.iter().map(|r| {
        vec![
            format!("{} {}×{}", r.shape.ty.name(), r.shape.rows, r.shape.cols),
            r.p.to_string(),
            format!("{:.3}", r.ms_per_gemm),
            three_significant(r.tflops),
        ]
    }));
    format!(
        "gemm {} ({} back to back per timing)\n{}",
        report.backend,
        report.repeats,
        columns(&rows)
    )
}

/// Rows laid out in columns: the first left-aligned, the rest right-aligned.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (s, &w))| {
                if c == 0 {
                    format!("{s:<w$}")
                } else {
                    format!("{s:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A median with its range, as the table's cells show it.
pub(super) fn spread(s: Spread) -> String {
    if s.min == s.max {
        number(s.median)
    } else {
        format!(
            "{} [{}..{}]",
            number(s.median),
            number(s.min),
            number(s.max)
        )
    }
}

/// Three significant digits or so, without exponent notation.
pub(super) fn number(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}
