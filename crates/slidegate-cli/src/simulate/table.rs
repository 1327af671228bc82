//! The comparison table `simulate` prints: plain text, aligned columns.

use std::fmt::Write;

use super::analysis::AlgorithmRun;
use super::traffic::{Trace, human_ms};

/// How a column lines up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// Renders `rows` under `headers` with two spaces between columns and a
/// dashed rule under the header, each line indented by two spaces.
fn render_columns(headers: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|(h, _)| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = String>| {
        let mut text = String::from(" ");
        for ((cell, (_, align)), w) in cells.zip(headers).zip(&widths) {
            let pad = " ".repeat(w - width(&cell));
            match align {
                Align::Left => write!(text, " {cell}{pad} "),
                Align::Right => write!(text, " {pad}{cell} "),
            }
            .unwrap_or(()); // writing to a String cannot fail
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().map(|(h, _)| (*h).to_owned()));
    line(&mut widths.iter().map(|&w| "-".repeat(w)));
    for row in rows {
        line(&mut row.iter().cloned());
    }
    out
}

/// The table for one trace: one row per run, the first run (the exact
/// sliding log) being the baseline for under-admission.
pub fn render(trace: &Trace, limit: u32, window_ms: u64, duration_ms: u64, runs: &[AlgorithmRun]) -> String {
    let window = human_ms(window_ms);
    let baseline = runs.first().map_or(0, |run| run.admitted);
    let max_header = format!("max in any {window}");
    let headers = [
        ("algorithm", Align::Left),
        ("requests", Align::Right),
        ("admitted", Align::Right),
        (max_header.as_str(), Align::Right),
        ("over limit?", Align::Left),
        ("under-admitted vs log", Align::Right),
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            vec![
                run.algorithm.to_string(),
                run.requests.to_string(),
                run.admitted.to_string(),
                run.max_in_window.to_string(),
                over_limit(run.max_in_window, limit),
                if i == 0 { "(baseline)".to_owned() } else { under_admission(baseline, run.admitted) },
            ]
        })
        .collect();

    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", trace.pattern, trace.description);
    let _ = writeln!(
        out,
        "  rule: {limit} per {window} per key; {} requests over {}",
        trace.requests.len(),
        human_ms(duration_ms)
    );
    out.push('\n');
    out.push_str(&render_columns(&headers, &rows));
    let offenders: Vec<String> = runs
        .iter()
        .filter(|run| run.max_in_window > u64::from(limit))
        .map(|run| format!("{} ({})", run.algorithm, ratio(run.max_in_window, limit)))
        .collect();
    if !offenders.is_empty() {
        let _ = writeln!(out, "  over the limit in a true {window} window: {}", offenders.join(", "));
    }
    out
}

/// The explanation printed once under all tables.
pub fn legend(window_ms: u64) -> String {
    let window = human_ms(window_ms);
    format!(
        "max in any {window}: the most requests admitted for one key in any true window (t - {window}, t].\n\
         under-admitted vs log: admitted by the exact sliding log minus admitted by the algorithm \
         (negative: admitted more than the exact log allows)."
    )
}

fn ratio(count: u64, limit: u32) -> String {
    format!("{:.2}×", count as f64 / f64::from(limit.max(1)))
}

fn over_limit(max_in_window: u64, limit: u32) -> String {
    if max_in_window > u64::from(limit) {
        format!("YES {}", ratio(max_in_window, limit))
    } else {
        "no".to_owned()
    }
}

fn under_admission(baseline: u64, admitted: u64) -> String {
    let diff = baseline as i128 - admitted as i128;
    if baseline == 0 {
        return diff.to_string();
    }
    let percent = diff as f64 * 100.0 / baseline as f64;
    format!("{diff} ({percent:.1}%)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidegate::Algorithm;

    use crate::simulate::traffic::Pattern;

    fn run(algorithm: Algorithm, admitted: u64, max_in_window: u64) -> AlgorithmRun {
        AlgorithmRun { algorithm, requests: 800, admitted, max_in_window, busiest_key_admitted: vec![] }
    }

    #[test]
    fn columns_line_up() {
        let trace =
            Trace { pattern: Pattern::Boundary, keys: 1, requests: vec![], description: "demo".into() };
        let runs = [
            run(Algorithm::SlidingLog, 400, 100),
            run(Algorithm::SLIDING_COUNTER, 390, 100),
            run(Algorithm::FixedWindow, 800, 200),
        ];
        let table = render(&trace, 100, 60_000, 300_000, &runs);
        assert!(table.starts_with("boundary — demo\n"), "{table}");
        assert!(table.contains("(baseline)"));
        assert!(table.contains("10 (2.5%)"), "{table}");
        assert!(table.contains("-400 (-100.0%)"), "{table}");
        assert!(table.contains("YES 2.00×"), "{table}");
        assert!(table.contains("over the limit in a true 1m window: fixed window (2.00×)"), "{table}");
        // Right-aligned numbers end in the same column.
        let body: Vec<&str> = table.lines().skip(3).take(5).collect();
        let ends: Vec<usize> = body.iter().map(|l| l.chars().count()).collect();
        assert!(ends.windows(2).all(|p| p[0] == p[1]), "{body:#?}");
    }
}
