//! Horizontal bar charts as SVG text, drawn with plotters' SVG backend.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Past this spread (largest / smallest value) a chart switches to a log scale.
const LOG_SPREAD: f64 = 20.0;

/// What a bar shows, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarKind {
    /// kcache, measured in this run.
    Kcache,
    /// A figure not measured in this run (client-go's, from `reference.rs`).
    Recorded,
    /// A peer or baseline measured in this run (kube-runtime, naive, rwlock-hashmap, …).
    Peer,
    /// The floor: the cost of the hand-off alone, no implementation can beat it.
    Floor,
}

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// The label on the axis.
    pub label: String,
    /// The value (bars with a value that is not a positive finite number are left out).
    pub value: f64,
    /// Its colour class.
    pub kind: BarKind,
}

fn colour(kind: BarKind) -> RGBColor {
    match kind {
        BarKind::Kcache => RGBColor(31, 119, 180),
        BarKind::Recorded => RGBColor(255, 127, 14),
        BarKind::Peer => RGBColor(120, 120, 120),
        BarKind::Floor => RGBColor(190, 190, 190),
    }
}

/// A value as a short label: `1.23 k`, `45.6`, `0.012`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{:.3} G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let text = if a >= 1.0 {
            format!("{v:.2}")
        } else {
            format!("{v:.3}")
        };
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A horizontal bar chart: one bar per entry of `bars` (top to bottom), titled `title`, with
/// `axis` under the value axis. The scale is logarithmic when the values spread more than 20×
/// (the axis says so). `mark` draws a vertical line at that value (e.g. 1 for ratios).
///
/// # Errors
/// No bar with a positive value, or a drawing error from plotters.
pub fn bar_chart(
    title: &str,
    axis: &str,
    bars: &[Bar],
    mark: Option<f64>,
) -> Result<String, String> {
    let bars: Vec<&Bar> = bars
        .iter()
        .filter(|b| b.value.is_finite() && b.value > 0.0)
        .collect();
    let (lo, hi) = bars.iter().fold((f64::MAX, 0.0f64), |(lo, hi), b| {
        (lo.min(b.value), hi.max(b.value))
    });
    if bars.is_empty() {
        return Err(format!("{title}: nothing to draw"));
    }
    let (lo, hi) = mark.map_or((lo, hi), |m| (lo.min(m), hi.max(m)));
    let log = hi / lo > LOG_SPREAD;
    // On a log scale the bars are drawn in log10 space and the labels put back.
    let to_axis = |v: f64| if log { v.log10() } else { v };
    let (start, end) = if log {
        (lo.log10().floor(), hi.log10().ceil() + 0.15)
    } else {
        (0.0, hi * 1.18)
    };
    let axis = if log {
        format!("{axis} (log scale)")
    } else {
        axis.to_string()
    };
    let n = bars.len();
    let height = 70 + 34 * n as u32;
    // Room for the longest label (about 7 px a character at this font size).
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0);
    let label_area = (longest as u32 * 7 + 16).clamp(120, 400);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (570 + label_area, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(label_area)
            // A segmented 0..m has m + 1 rows (the last value gets its own), so 0..n-1 has n.
            .build_cartesian_2d(start..end, (0..n - 1).into_segmented())
            .map_err(err)?;
        let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
        let y_label = |v: &SegmentValue<usize>| match v {
            // Row 0 at the top.
            SegmentValue::CenterOf(i) if *i < n => labels
                .get(n - 1 - *i)
                .map_or_else(String::new, |s| s.to_string()),
            _ => String::new(),
        };
        let x_label = |v: &f64| short(if log { 10f64.powf(*v) } else { *v });
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&y_label)
            .x_labels(if log {
                (end - start).ceil() as usize + 1
            } else {
                6
            })
            .x_label_formatter(&x_label)
            .x_desc(axis)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        let row = |i: usize| n - 1 - i;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let (y0, y1) = (SegmentValue::Exact(row(i)), SegmentValue::Exact(row(i) + 1));
                let mut r = Rectangle::new(
                    [(start, y0), (to_axis(b.value), y1)],
                    colour(b.kind).filled(),
                );
                r.set_margin(5, 5, 0, 0);
                r
            }))
            .map_err(err)?;
        let value_style =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let at = (to_axis(b.value), SegmentValue::CenterOf(row(i)));
                Text::new(format!(" {}", short(b.value)), at, value_style.clone())
            }))
            .map_err(err)?;
        if let Some(m) = mark {
            let line = [
                (to_axis(m), SegmentValue::Exact(0)),
                (to_axis(m), SegmentValue::Exact(n)),
            ];
            chart
                .draw_series(std::iter::once(PathElement::new(
                    line,
                    BLACK.stroke_width(1),
                )))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn err(e: impl std::fmt::Debug) -> String {
    format!("drawing a chart: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: f64, kind: BarKind) -> Bar {
        Bar {
            label: label.into(),
            value,
            kind,
        }
    }

    #[test]
    fn a_chart_is_an_svg_with_every_label_and_value() {
        let svg = bar_chart(
            "q1: ns per item",
            "ns per item (lower is better)",
            &[
                bar("kcache", 120.0, BarKind::Kcache),
                bar("client-go (2026-12-03)", 381.0, BarKind::Recorded),
                bar("floor", 65.0, BarKind::Floor),
            ],
            None,
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        // Each text element's content sits on a line of its own.
        let texts: Vec<&str> = svg.lines().map(str::trim).collect();
        for text in [
            "kcache",
            "client-go (2026-12-03)",
            "floor",
            "120",
            "381",
            "65",
        ] {
            assert!(texts.contains(&text), "{text} missing");
        }
        assert!(!svg.contains("log scale"));
    }

    #[test]
    fn short_labels_drop_trailing_zeros() {
        let got: Vec<String> = [0.0, 0.096, 10.0, 78.5, 552.0, 12_345.0, 2.5e6]
            .map(short)
            .into();
        assert_eq!(
            got,
            ["0", "0.096", "10", "78.5", "552", "12.3 k", "2.500 M"]
        );
    }

    #[test]
    fn a_wide_spread_switches_to_a_log_scale_and_no_value_is_an_error() {
        let svg = bar_chart(
            "spread",
            "ns",
            &[
                bar("a", 10.0, BarKind::Kcache),
                bar("b", 10_000.0, BarKind::Peer),
            ],
            Some(1.0),
        )
        .unwrap();
        assert!(svg.contains("ns (log scale)"));
        assert!(bar_chart("empty", "ns", &[bar("a", f64::NAN, BarKind::Kcache)], None).is_err());
    }
}
