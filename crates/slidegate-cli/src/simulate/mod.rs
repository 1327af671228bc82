//! `slidegate simulate`: every algorithm on the same generated traffic.
//!
//! Each pattern's trace runs through the real [`MemoryStore`](slidegate::MemoryStore)
//! (through the `Store` API, with a manual clock) once per algorithm; the
//! admitted requests are then measured against the *true* sliding window.
//! The boundary pattern shows the point of the project: fixed windows admit
//! about twice the limit around a boundary, the exact sliding log never
//! exceeds it, and the sliding counter never exceeds it either while
//! admitting slightly less.

pub mod analysis;
pub mod plot;
pub mod table;
pub mod traffic;

use std::time::Duration;

use anyhow::ensure;
use slidegate::Rule;

use crate::cli::SimulateArgs;
use crate::rule_args::{AlgorithmArg, build_rule, parse_buckets};
use analysis::AlgorithmRun;
use traffic::{Pattern, Trace, TrafficSpec};

/// Windows of traffic generated when `--duration` is not given.
pub const DEFAULT_WINDOWS: u32 = 5;

/// One pattern's result.
#[derive(Debug, Clone)]
pub struct PatternResult {
    /// The generated traffic.
    pub trace: Trace,
    /// One run per algorithm: log, counter, fixed, GCRA.
    pub runs: Vec<AlgorithmRun>,
}

/// Runs `slidegate simulate`: prints a table per pattern and, with
/// `--plot`, writes the SVG.
///
/// # Errors
///
/// An invalid rule or duration, a trace too large to generate, or a plot
/// that cannot be written.
pub async fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    let rules = rules(args.limit, args.window, args.buckets)?;
    let window_ms = rules[0].window_ms();
    let duration_ms = match args.duration {
        Some(duration) => whole_ms(duration, "--duration")?,
        None => window_ms * u64::from(DEFAULT_WINDOWS),
    };
    let spec = TrafficSpec { limit: args.limit, window_ms, duration_ms, seed: args.seed };
    let mut panels = Vec::new();
    for pattern in args.pattern.patterns() {
        let result = simulate(pattern, &spec, &rules).await?;
        println!("{}", table::render(&result.trace, args.limit, window_ms, duration_ms, &result.runs));
        panels.push(plot::Panel::new(&result.trace, args.limit, window_ms, duration_ms, &result.runs));
    }
    println!("{}", table::legend(window_ms));
    if let Some(path) = &args.plot {
        plot::write_svg(path, &panels)?;
        println!("\nwrote plot to {}", path.display());
    }
    Ok(())
}

/// Generates `pattern` for `spec` and runs it under each of `rules`.
///
/// # Errors
///
/// When the trace cannot be generated (see [`traffic::generate`]).
pub async fn simulate(pattern: Pattern, spec: &TrafficSpec, rules: &[Rule]) -> anyhow::Result<PatternResult> {
    let trace = traffic::generate(pattern, spec)?;
    let runs = analysis::compare(&trace, rules).await?;
    Ok(PatternResult { trace, runs })
}

/// The rule under every algorithm, the exact sliding log first.
///
/// # Errors
///
/// When the limit, window or bucket count is invalid for any algorithm.
pub fn rules(limit: u32, window: Duration, buckets: u16) -> anyhow::Result<Vec<Rule>> {
    let buckets = parse_buckets(buckets)?;
    AlgorithmArg::ALL
        .iter()
        .map(|algorithm| build_rule(limit, window, algorithm.to_algorithm(buckets)))
        .collect()
}

fn whole_ms(duration: Duration, flag: &str) -> anyhow::Result<u64> {
    let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    ensure!(ms > 0, "{flag} must be at least 1ms");
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn boundary_shows_the_fixed_window_doubling() {
        let rules = rules(100, Duration::from_secs(60), 10).unwrap();
        let spec = TrafficSpec { limit: 100, window_ms: 60_000, duration_ms: 300_000, seed: 1 };
        let result = simulate(Pattern::Boundary, &spec, &rules).await.unwrap();
        let [log, counter, fixed, gcra] = &result.runs[..] else { panic!("four runs") };
        assert_eq!(log.max_in_window, 100);
        assert!(counter.max_in_window <= 100);
        assert!(log.admitted >= counter.admitted);
        assert!(fixed.max_in_window >= 190, "fixed admitted {} in a window", fixed.max_in_window);
        assert!(gcra.max_in_window > 100);
    }

    #[tokio::test]
    async fn exact_algorithms_never_exceed_the_limit_on_any_pattern() {
        let rules = rules(50, Duration::from_secs(10), 10).unwrap();
        let spec = TrafficSpec { limit: 50, window_ms: 10_000, duration_ms: 50_000, seed: 3 };
        for pattern in Pattern::ALL {
            let result = simulate(pattern, &spec, &rules).await.unwrap();
            let (log, counter) = (&result.runs[0], &result.runs[1]);
            assert!(log.max_in_window <= 50, "{pattern}: log {}", log.max_in_window);
            assert!(counter.max_in_window <= 50, "{pattern}: counter {}", counter.max_in_window);
            assert!(log.admitted >= counter.admitted, "{pattern}");
        }
    }
}
