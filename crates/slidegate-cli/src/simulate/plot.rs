//! `simulate --plot`: admitted requests in the trailing window over time,
//! one line per algorithm, with the limit as a dashed reference — the
//! picture of fixed windows doubling the limit at each boundary.

use std::path::Path;

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::analysis::{AlgorithmRun, trailing_window_counts};
use super::traffic::{Trace, human_ms};

/// Above this many points a line is reduced to its peak per pixel column,
/// so huge traces still give a small SVG with every peak visible.
const MAX_POINTS: usize = 4000;

/// Pixel columns of the reduced line.
const REDUCED_COLUMNS: u64 = 1600;

const PANEL_SIZE: (u32, u32) = (820, 480);
const TITLE_HEIGHT: u32 = 44;

/// One line colour per algorithm, in the order of the runs (log, counter,
/// fixed, GCRA): blue, green, red, orange.
const PALETTE: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(255, 127, 14)];

/// What one chart shows.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The chart's caption.
    pub title: String,
    /// The limit, drawn as a dashed line.
    pub limit: u32,
    /// The window, for the axis label.
    pub window_ms: u64,
    /// End of the time axis.
    pub duration_ms: u64,
    /// `(algorithm, points)`: admitted in the trailing window, as
    /// `(time ms, count)` corners of a step line.
    pub lines: Vec<(String, Vec<(u64, u64)>)>,
}

impl Panel {
    /// The chart of `runs` over `trace` (key 0, the busiest key).
    pub fn new(trace: &Trace, limit: u32, window_ms: u64, duration_ms: u64, runs: &[AlgorithmRun]) -> Panel {
        let key_note = if trace.keys > 1 { ", busiest key" } else { "" };
        let lines = runs
            .iter()
            .map(|run| {
                let steps = trailing_window_counts(&run.busiest_key_admitted, window_ms);
                (run.algorithm.to_string(), step_line(&steps, duration_ms))
            })
            .collect();
        Panel {
            title: format!("{} — {limit} per {}{key_note}", trace.pattern, human_ms(window_ms)),
            limit,
            window_ms,
            duration_ms,
            lines,
        }
    }
}

/// The corners of a step function that starts at 0, changes to `count` at
/// each `(time, count)`, and is cut at `end`.
fn step_line(steps: &[(u64, u64)], end: u64) -> Vec<(u64, u64)> {
    let mut points = vec![(0, 0)];
    let mut current = 0;
    for &(at, count) in steps.iter().take_while(|&&(at, _)| at <= end) {
        points.push((at, current));
        points.push((at, count));
        current = count;
    }
    points.push((end, current));
    if points.len() > MAX_POINTS { peaks_per_column(&points, end) } else { points }
}

/// Keeps the highest value of each of [`REDUCED_COLUMNS`] time columns.
fn peaks_per_column(points: &[(u64, u64)], end: u64) -> Vec<(u64, u64)> {
    let column_ms = end.div_ceil(REDUCED_COLUMNS).max(1);
    let mut reduced: Vec<(u64, u64)> = Vec::with_capacity(REDUCED_COLUMNS as usize + 1);
    for &(at, count) in points {
        let start = at / column_ms * column_ms;
        match reduced.last_mut() {
            Some((column, peak)) if *column == start => *peak = (*peak).max(count),
            _ => reduced.push((start, count)),
        }
    }
    reduced
}

/// Draws `panels` (one, or a two-column grid) into an SVG document.
///
/// # Errors
///
/// If plotters fails to lay out the chart.
pub fn render_svg(panels: &[Panel]) -> anyhow::Result<String> {
    let columns = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(columns).max(1);
    let size = (PANEL_SIZE.0 * columns as u32, PANEL_SIZE.1 * rows as u32 + TITLE_HEIGHT);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(
            "slidegate simulate: admitted requests in the trailing window",
            ("sans-serif", 24).into_font().color(&BLACK),
        )?;
        for (panel, area) in panels.iter().zip(body.split_evenly((rows, columns))) {
            draw_panel(&area, panel)?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// Renders `panels` and writes them to `path`.
///
/// # Errors
///
/// If the chart cannot be drawn or the file cannot be written.
pub fn write_svg(path: &Path, panels: &[Panel]) -> anyhow::Result<()> {
    let svg = render_svg(panels).context("cannot draw the plot")?;
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}

fn draw_panel(area: &DrawingArea<SVGBackend<'_>, Shift>, panel: &Panel) -> anyhow::Result<()> {
    let limit = f64::from(panel.limit);
    let x_max = (panel.duration_ms as f64 / 1000.0).max(0.001);
    let peak = panel.lines.iter().flat_map(|(_, points)| points).map(|&(_, c)| c).max().unwrap_or(0);
    // Head room above the highest line keeps the legend clear of the data.
    let y_max = (peak as f64).max(limit) * 1.45;

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    let x_decimals = if x_max >= 20.0 {
        0
    } else if x_max >= 2.0 {
        1
    } else {
        3
    };
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(format!("admitted in trailing {}", human_ms(panel.window_ms)))
        .x_label_formatter(&|x| format!("{x:.x_decimals$}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_max_light_lines(2)
        .y_max_light_lines(2)
        .light_line_style(RGBColor(242, 242, 242))
        .bold_line_style(RGBColor(215, 215, 215))
        .label_style(("sans-serif", 13))
        .draw()?;

    let reference = ShapeStyle::from(&BLACK.mix(0.7)).stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new(vec![(0.0, limit), (x_max, limit)], 8, 5, reference))?
        .label(format!("limit ({})", panel.limit))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], reference));

    // The legend lists the algorithms in order (exact log first), but the
    // lines are drawn in reverse so the exact log ends up on top, where
    // lines that sit on each other still show it.
    let style = |index: usize| PALETTE[index % PALETTE.len()].stroke_width(2);
    for (index, (name, _)) in panel.lines.iter().enumerate() {
        let style = style(index);
        chart
            .draw_series(LineSeries::new(std::iter::empty::<(f64, f64)>(), style))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
    }
    for (index, (_, points)) in panel.lines.iter().enumerate().rev() {
        let scaled = points.iter().map(|&(t, c)| (t as f64 / 1000.0, c as f64));
        chart.draw_series(LineSeries::new(scaled, style(index)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_line_has_corners_and_ends_at_the_duration() {
        let points = step_line(&[(10, 1), (20, 2), (30, 0), (99, 5)], 50);
        assert_eq!(points, vec![(0, 0), (10, 0), (10, 1), (20, 1), (20, 2), (30, 2), (30, 0), (50, 0)]);
    }

    #[test]
    fn long_lines_keep_their_peaks() {
        let steps: Vec<(u64, u64)> = (0..10_000).map(|i| (i, if i == 5_000 { 99 } else { i % 3 })).collect();
        let points = step_line(&steps, 10_000);
        assert!(points.len() <= REDUCED_COLUMNS as usize + 1);
        assert_eq!(points.iter().map(|p| p.1).max(), Some(99));
    }

    #[test]
    fn renders_an_svg_document() {
        let panel = Panel {
            title: "demo".into(),
            limit: 2,
            window_ms: 1000,
            duration_ms: 3000,
            lines: vec![("sliding log".into(), vec![(0, 0), (500, 2), (3000, 1)])],
        };
        let svg = render_svg(&[panel.clone(), panel]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.contains("sliding log") && svg.contains("limit (2)"));
    }
}
