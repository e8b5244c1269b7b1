//! The report as a hand-written SVG bar chart: prefill tok/s per prompt size and decode tok/s,
//! one colour per backend, with each backend's decode roofline (peak GB/s / bytes per token)
//! drawn as a dashed line over its decode bar.

use super::table::number;
use super::Report;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
const COLOURS: [&str; 4] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"];

/// One bar: which backend (colour), its height, and an optional ceiling line.
struct Bar {
    backend: usize,
    value: f64,
    ceiling: Option<f64>,
}

/// Bars side by side under one label.
struct Group {
    label: String,
    bars: Vec<Bar>,
}

pub fn render_svg(report: &Report) -> String {
    let runs: Vec<(usize, &super::BackendRun)> = report
        .backends
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.run.as_ref().map(|r| (i, r)))
        .collect();
    let prefill: Vec<Group> = report
        .prefill_columns()
        .into_iter()
        .map(|tokens| Group {
            label: format!("pp{tokens}"),
            bars: runs
                .iter()
                .filter_map(|&(i, run)| {
                    run.prefill_at(tokens).map(|rate| Bar {
                        backend: i,
                        value: rate.median,
                        ceiling: None,
                    })
                })
                .collect(),
        })
        .collect();
    let decode = vec![Group {
        label: report
            .common_decode_tokens()
            .map_or("tg".into(), |n| format!("tg{n}")),
        bars: runs
            .iter()
            .map(|&(i, run)| Bar {
                backend: i,
                value: run.decode.tok_per_s.median,
                ceiling: run.decode_ceiling_tok_per_s,
            })
            .collect(),
    }];

    let mut title = format!("qwen35 bench: {}", report.model);
    if let Some(why) = &report.invalid {
        title = format!("INVALID ({why}) — {title}");
    }
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let title_colour = if report.invalid.is_some() {
        "#c00"
    } else {
        "black"
    };
    svg.push_str(&text(
        WIDTH / 2.0,
        22.0,
        "middle",
        &format!("font-size=\"14\" fill=\"{title_colour}\""),
        &title,
    ));
    panel(&mut svg, 60.0, 50.0, 400.0, "prefill tok/s", &prefill);
    panel(&mut svg, 540.0, 50.0, 180.0, "decode tok/s", &decode);

    // Legend: one swatch per backend that ran, then the roofline's dash.
    let mut x = 60.0;
    let y = HEIGHT - 22.0;
    for &(i, _) in &runs {
        let name = report.backends.get(i).map_or("", |b| b.backend.as_str());
        svg.push_str(&format!(
            "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
            y - 10.0,
            colour(i)
        ));
        svg.push_str(&text(x + 16.0, y, "start", "", name));
        x += 24.0 + 8.0 * name.chars().count() as f64;
    }
    svg.push_str(&format!(
        "<line x1=\"{x}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n",
        y - 4.0,
        x + 20.0,
        y - 4.0
    ));
    svg.push_str(&text(
        x + 24.0,
        y,
        "start",
        "",
        "decode roofline: peak GB/s / weight bytes per token",
    ));
    svg.push_str("</svg>\n");
    svg
}

const PANEL_HEIGHT: f64 = 290.0;

/// Axes, ticks and bars of one chart whose top-left corner is (x0, y0).
fn panel(svg: &mut String, x0: f64, y0: f64, width: f64, label: &str, groups: &[Group]) {
    let top = groups
        .iter()
        .flat_map(|g| &g.bars)
        .flat_map(|b| [Some(b.value), b.ceiling])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let bottom = y0 + PANEL_HEIGHT;
    let y_of = |v: f64| bottom - (v / top).clamp(0.0, 1.0) * PANEL_HEIGHT;

    svg.push_str(&text(x0, y0 - 8.0, "start", "font-weight=\"bold\"", label));
    for tick in 0..=4 {
        let v = top * tick as f64 / 4.0;
        let y = y_of(v);
        svg.push_str(&format!(
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n",
            x0 + width
        ));
        svg.push_str(&text(x0 - 6.0, y + 4.0, "end", "", &number(v)));
    }
    svg.push_str(&format!(
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{bottom}\" stroke=\"black\"/>\n\
         <line x1=\"{x0}\" y1=\"{bottom}\" x2=\"{:.1}\" y2=\"{bottom}\" stroke=\"black\"/>\n",
        x0 + width
    ));

    let group_width = width / groups.len().max(1) as f64;
    for (g, group) in groups.iter().enumerate() {
        let gx = x0 + g as f64 * group_width;
        let bar_width = (group_width * 0.8) / group.bars.len().max(1) as f64;
        for (b, bar) in group.bars.iter().enumerate() {
            let x = gx + group_width * 0.1 + b as f64 * bar_width;
            let y = y_of(bar.value);
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>\n",
                bar_width * 0.9,
                bottom - y,
                colour(bar.backend),
                number(bar.value)
            ));
            svg.push_str(&text(
                x + bar_width * 0.45,
                y - 3.0,
                "middle",
                "font-size=\"10\"",
                &number(bar.value),
            ));
            if let Some(ceiling) = bar.ceiling {
                let cy = y_of(ceiling);
                svg.push_str(&format!(
                    "<line x1=\"{x:.1}\" y1=\"{cy:.1}\" x2=\"{:.1}\" y2=\"{cy:.1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n",
                    x + bar_width * 0.9
                ));
                svg.push_str(&text(
                    x + bar_width * 0.45,
                    cy - 3.0,
                    "middle",
                    "font-size=\"10\"",
                    &format!("roofline {}", number(ceiling)),
                ));
            }
        }
        svg.push_str(&text(
            gx + group_width / 2.0,
            bottom + 16.0,
            "middle",
            "",
            &group.label,
        ));
    }
}

fn colour(backend: usize) -> &'static str {
    COLOURS[backend % COLOURS.len()]
}

fn text(x: f64, y: f64, anchor: &str, attributes: &str, content: &str) -> String {
    format!(
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" {attributes}>{}</text>\n",
        escape(content)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
