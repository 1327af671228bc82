//! Turning command-line flags into a valid [`Rule`]: algorithm names,
//! durations, and the checks `slidegate::Rule` performs.

use std::num::NonZeroU16;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use slidegate::limits::DEFAULT_BUCKETS;
use slidegate::{Algorithm, Rule};

/// The algorithms, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmArg {
    /// Exact sliding log: never more than the limit in any window.
    Log,
    /// Sliding counter with `--buckets` buckets: never more, sometimes slightly less.
    Counter,
    /// Fixed windows: up to twice the limit across a window boundary.
    Fixed,
    /// GCRA / token bucket of `limit` tokens refilled over the window.
    Gcra,
}

impl AlgorithmArg {
    /// The core algorithm, with `buckets` for the sliding counter.
    pub fn to_algorithm(self, buckets: NonZeroU16) -> Algorithm {
        match self {
            AlgorithmArg::Log => Algorithm::SlidingLog,
            AlgorithmArg::Counter => Algorithm::SlidingCounter { buckets },
            AlgorithmArg::Fixed => Algorithm::FixedWindow,
            AlgorithmArg::Gcra => Algorithm::Gcra,
        }
    }

    /// Every algorithm, the exact sliding log first (the baseline others are
    /// compared with).
    pub const ALL: [AlgorithmArg; 4] =
        [AlgorithmArg::Log, AlgorithmArg::Counter, AlgorithmArg::Fixed, AlgorithmArg::Gcra];
}

/// The rule flags shared by `replay` and `bench`.
#[derive(Debug, Clone, Args)]
pub struct RuleArgs {
    /// Counting algorithm [default: log].
    // No clap defaults or requirements here: `bench --target` drives a
    // service and takes no rule, and clap cannot make an argument required
    // in one subcommand only; `to_rule` names what is missing.
    #[arg(long, value_enum)]
    pub algorithm: Option<AlgorithmArg>,

    /// Most cost admitted per window, at least 1 (required).
    #[arg(long)]
    pub limit: Option<u32>,

    /// Window length, e.g. `500ms`, `1s`, `1m` (whole milliseconds, at most
    /// 366 days; required).
    #[arg(long, value_parser = parse_duration)]
    pub window: Option<Duration>,

    /// Buckets per window of the sliding counter (only with `--algorithm counter`) [default: 10].
    #[arg(long)]
    pub buckets: Option<u16>,
}

impl RuleArgs {
    /// The rule these flags describe.
    ///
    /// # Errors
    ///
    /// When the rule is invalid (limit 0, window out of range, buckets out
    /// of range) or `--buckets` is given for an algorithm without buckets.
    pub fn to_rule(&self) -> anyhow::Result<Rule> {
        let (Some(limit), Some(window)) = (self.limit, self.window) else {
            bail!("give the rule: --limit and --window (e.g. --limit 100 --window 1m)");
        };
        let algorithm = self.algorithm.unwrap_or(AlgorithmArg::Log);
        if self.buckets.is_some() && algorithm != AlgorithmArg::Counter {
            bail!("--buckets only applies to --algorithm counter");
        }
        let buckets = parse_buckets(self.buckets.unwrap_or(DEFAULT_BUCKETS.get()))?;
        build_rule(limit, window, algorithm.to_algorithm(buckets))
    }
}

/// A bucket count, rejecting zero with a message naming the flag.
///
/// # Errors
///
/// When `buckets` is 0.
pub fn parse_buckets(buckets: u16) -> anyhow::Result<NonZeroU16> {
    NonZeroU16::new(buckets).context("--buckets must be at least 1")
}

/// `limit` per `window` under `algorithm`, with the core's own message when
/// the combination is invalid.
///
/// # Errors
///
/// When [`Rule::new`] or [`Rule::with_algorithm`] rejects the values.
pub fn build_rule(limit: u32, window: Duration, algorithm: Algorithm) -> anyhow::Result<Rule> {
    Rule::new(limit, window)
        .and_then(|rule| rule.with_algorithm(algorithm))
        .context("cannot build the rule from --limit, --window and --algorithm")
}

/// Parses a human duration (`250ms`, `1s`, `1m 30s`) for clap.
///
/// # Errors
///
/// A message saying what was expected, shown by clap next to the flag.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{e} (expected a duration such as 500ms, 1s or 1m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(algorithm: AlgorithmArg, limit: u32, buckets: Option<u16>) -> RuleArgs {
        RuleArgs {
            algorithm: Some(algorithm),
            limit: Some(limit),
            window: Some(Duration::from_secs(1)),
            buckets,
        }
    }

    #[test]
    fn builds_each_algorithm() {
        for algorithm in AlgorithmArg::ALL {
            let rule = args(algorithm, 5, None).to_rule().unwrap();
            assert_eq!(rule.limit(), 5);
            assert_eq!(rule.window_ms(), 1000);
        }
        let rule = args(AlgorithmArg::Counter, 5, Some(4)).to_rule().unwrap();
        assert_eq!(rule.algorithm(), Algorithm::SlidingCounter { buckets: NonZeroU16::new(4).unwrap() });
    }

    #[test]
    fn rejects_bad_rules_with_reasons() {
        let err = args(AlgorithmArg::Log, 0, None).to_rule().unwrap_err();
        assert!(format!("{err:#}").contains("limit must be at least 1"), "{err:#}");
        let err = args(AlgorithmArg::Fixed, 5, Some(4)).to_rule().unwrap_err();
        assert!(err.to_string().contains("--buckets only applies"), "{err:#}");
        let err = args(AlgorithmArg::Counter, 5, Some(0)).to_rule().unwrap_err();
        assert!(err.to_string().contains("at least 1"), "{err:#}");
        let err = args(AlgorithmArg::Counter, 5, Some(1001)).to_rule().unwrap_err();
        assert!(format!("{err:#}").contains("at most 1000"), "{err:#}");
    }

    #[test]
    fn parses_human_durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("soon").unwrap_err().contains("expected a duration"));
    }
}
