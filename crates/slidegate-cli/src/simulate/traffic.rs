//! Deterministic traffic: the same pattern, rule and seed always give the
//! same requests, so a table or plot can be reproduced by anyone.

use std::fmt;

use anyhow::{bail, ensure};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The most requests one generated trace may hold, so that a large
/// `--limit` or `--duration` fails fast instead of exhausting memory.
pub const MAX_REQUESTS: u128 = 20_000_000;

/// Number of keys of [`Pattern::ManyKeys`].
pub const MANY_KEYS: u32 = 1000;

/// Requests per window of [`Pattern::ManyKeys`], over all keys, in multiples of the limit.
const MANY_KEYS_LOAD: u64 = 25;

/// A kind of traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// One key; a full quota in the last 5% of a fixed window and another
    /// in the first 5% of the next, at every boundary.
    Boundary,
    /// One key; a steady stream at 1.5× the limit.
    Steady,
    /// One key; bursts at 4× the limit lasting 10–50% of a window,
    /// separated by silences of 50–150% of a window.
    Bursty,
    /// [`MANY_KEYS`] keys with Zipf(1) popularity and 25× the limit per
    /// window in total: the hottest keys exceed the limit, most do not.
    ManyKeys,
}

impl Pattern {
    /// Every pattern, in display order.
    pub const ALL: [Pattern; 4] = [Pattern::Boundary, Pattern::Steady, Pattern::Bursty, Pattern::ManyKeys];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Boundary => "boundary",
            Pattern::Steady => "steady",
            Pattern::Bursty => "bursty",
            Pattern::ManyKeys => "many-keys",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to generate traffic for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrafficSpec {
    /// The rule's limit per window (traffic is scaled to it).
    pub limit: u32,
    /// The rule's window, in milliseconds (at least 1).
    pub window_ms: u64,
    /// Length of the trace, in milliseconds.
    pub duration_ms: u64,
    /// Seed of the generator.
    pub seed: u64,
}

/// One generated request of cost 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// When it arrives (ms since the trace started, which is a multiple of
    /// the window, so fixed windows start at 0).
    pub at_ms: u64,
    /// Index of its key, `0..keys`; key 0 is always the busiest.
    pub key: u32,
}

/// A generated trace, sorted by time.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The pattern it follows.
    pub pattern: Pattern,
    /// Number of distinct keys.
    pub keys: u32,
    /// The requests, by time.
    pub requests: Vec<Request>,
    /// One line saying what the traffic is, for the table's title.
    pub description: String,
}

/// Generates `pattern` for `spec`.
///
/// # Errors
///
/// When the trace would be too long ([`MAX_REQUESTS`]) or too short to
/// show the pattern (boundary bursts need at least one window boundary).
pub fn generate(pattern: Pattern, spec: &TrafficSpec) -> anyhow::Result<Trace> {
    ensure!(spec.window_ms > 0 && spec.duration_ms > 0, "window and duration must be positive");
    let limit = u128::from(spec.limit);
    let windows = u128::from(spec.duration_ms).div_ceil(u128::from(spec.window_ms));
    let estimate = match pattern {
        Pattern::Boundary => 2 * limit * windows,
        Pattern::Steady => 3 * limit * windows / 2,
        Pattern::Bursty => 4 * limit * windows,
        Pattern::ManyKeys => u128::from(MANY_KEYS_LOAD) * limit * windows,
    };
    if estimate > MAX_REQUESTS {
        bail!(
            "the {pattern} trace would hold about {estimate} requests (at most {MAX_REQUESTS}); \
             use a smaller --limit or --duration"
        );
    }
    let mut rng = StdRng::seed_from_u64(spec.seed ^ pattern_salt(pattern));
    let trace = match pattern {
        Pattern::Boundary => boundary(spec, &mut rng)?,
        Pattern::Steady => steady(spec, &mut rng),
        Pattern::Bursty => bursty(spec, &mut rng),
        Pattern::ManyKeys => many_keys(spec, &mut rng),
    };
    Ok(trace)
}

/// Different patterns draw different random numbers from the same seed.
fn pattern_salt(pattern: Pattern) -> u64 {
    match pattern {
        Pattern::Boundary => 0x6264,
        Pattern::Steady => 0x7374,
        Pattern::Bursty => 0x6273,
        Pattern::ManyKeys => 0x6d6b,
    }
}

/// `count` sorted times spread over `[start, start + span)`: each falls
/// uniformly at random inside its own equal slot, so the rate is even and
/// the order is already sorted.
fn spread(count: u64, start: u64, span: u64, rng: &mut StdRng, out: &mut Vec<u64>) {
    let span = span.max(1);
    for i in 0..count {
        let from = u128::from(i) * u128::from(span) / u128::from(count);
        let to = (u128::from(i) + 1) * u128::from(span) / u128::from(count);
        let offset = if to > from { rng.random_range(from..to) } else { from };
        out.push(start + offset as u64);
    }
}

fn single_key(pattern: Pattern, times: Vec<u64>, description: String) -> Trace {
    let requests = times.into_iter().map(|at_ms| Request { at_ms, key: 0 }).collect();
    Trace { pattern, keys: 1, requests, description }
}

fn boundary(spec: &TrafficSpec, rng: &mut StdRng) -> anyhow::Result<Trace> {
    let (w, limit) = (spec.window_ms, u64::from(spec.limit));
    let burst = (w / 20).max(1);
    let boundaries: Vec<u64> = (1..).map(|k| k * w).take_while(|&b| b + burst <= spec.duration_ms).collect();
    if boundaries.is_empty() {
        bail!("the boundary pattern needs a duration of at least one window plus 5%");
    }
    let mut times = Vec::new();
    for &at in &boundaries {
        spread(limit, at - burst, burst, rng, &mut times);
        spread(limit, at, burst, rng, &mut times);
    }
    let description = format!(
        "{limit} requests in the {} before and {limit} in the {} after each of {} window boundaries, 1 key",
        human_ms(burst),
        human_ms(burst),
        boundaries.len()
    );
    Ok(single_key(Pattern::Boundary, times, description))
}

fn steady(spec: &TrafficSpec, rng: &mut StdRng) -> Trace {
    let count = u128::from(spec.limit) * 3 * u128::from(spec.duration_ms) / (2 * u128::from(spec.window_ms));
    let mut times = Vec::new();
    spread(count.max(1) as u64, 0, spec.duration_ms, rng, &mut times);
    let per_window = u64::from(spec.limit) * 3 / 2;
    let description = format!("a steady {per_window} requests per window (1.5× the limit), 1 key");
    single_key(Pattern::Steady, times, description)
}

fn bursty(spec: &TrafficSpec, rng: &mut StdRng) -> Trace {
    let w = spec.window_ms;
    let mut times = Vec::new();
    let mut at = 0;
    while at < spec.duration_ms {
        let on = rng.random_range((w / 10).max(1)..=(w / 2).max(1)).min(spec.duration_ms - at);
        let count = (u128::from(spec.limit) * 4 * u128::from(on) / u128::from(w)).max(1) as u64;
        spread(count, at, on, rng, &mut times);
        at += on + rng.random_range((w / 2).max(1)..=(w * 3 / 2).max(1));
    }
    let description = "bursts at 4× the limit for 10–50% of a window, then silence for 50–150%, 1 key";
    single_key(Pattern::Bursty, times, description.to_owned())
}

fn many_keys(spec: &TrafficSpec, rng: &mut StdRng) -> Trace {
    // Zipf(1): key k (0-based) is drawn with weight 1/(k+1).
    let mut cumulative = Vec::with_capacity(MANY_KEYS as usize);
    let mut total = 0.0;
    for k in 0..MANY_KEYS {
        total += 1.0 / f64::from(k + 1);
        cumulative.push(total);
    }
    let count = u128::from(spec.limit) * u128::from(MANY_KEYS_LOAD) * u128::from(spec.duration_ms)
        / u128::from(spec.window_ms);
    let mut times = Vec::new();
    spread(count.max(1) as u64, 0, spec.duration_ms, rng, &mut times);
    let requests = times
        .into_iter()
        .map(|at_ms| {
            let draw = rng.random_range(0.0..total);
            let key = cumulative.partition_point(|&c| c <= draw).min(MANY_KEYS as usize - 1);
            Request { at_ms, key: key as u32 }
        })
        .collect();
    let hottest = (f64::from(spec.limit) * MANY_KEYS_LOAD as f64 / total).round();
    let description = format!(
        "{MANY_KEYS} keys, Zipf(1) popularity, {} requests per window in all (hottest key ≈ {hottest})",
        u64::from(spec.limit) * MANY_KEYS_LOAD
    );
    Trace { pattern: Pattern::ManyKeys, keys: MANY_KEYS, requests, description }
}

/// A duration in milliseconds, the way humans write it (`3s`, `250ms`).
pub fn human_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TrafficSpec {
        TrafficSpec { limit: 100, window_ms: 60_000, duration_ms: 300_000, seed: 7 }
    }

    #[test]
    fn traces_are_sorted_deterministic_and_inside_the_duration() {
        for pattern in Pattern::ALL {
            let a = generate(pattern, &spec()).unwrap();
            let b = generate(pattern, &spec()).unwrap();
            assert_eq!(a.requests, b.requests, "{pattern} is deterministic");
            assert!(!a.requests.is_empty());
            assert!(a.requests.windows(2).all(|p| p[0].at_ms <= p[1].at_ms), "{pattern} sorted");
            assert!(a.requests.iter().all(|r| r.at_ms < 300_000 && r.key < a.keys));
        }
    }

    #[test]
    fn boundary_bursts_straddle_each_boundary() {
        let trace = generate(Pattern::Boundary, &spec()).unwrap();
        assert_eq!(trace.requests.len(), 4 * 200);
        let around_first: Vec<_> = trace.requests.iter().filter(|r| r.at_ms < 63_000).collect();
        assert_eq!(around_first.len(), 200);
        assert!(around_first.iter().all(|r| r.at_ms >= 57_000));
        assert_eq!(around_first.iter().filter(|r| r.at_ms < 60_000).count(), 100);
    }

    #[test]
    fn steady_and_many_keys_have_the_promised_load() {
        assert_eq!(generate(Pattern::Steady, &spec()).unwrap().requests.len(), 750);
        let many = generate(Pattern::ManyKeys, &spec()).unwrap();
        assert_eq!(many.requests.len(), 12_500);
        let hot = many.requests.iter().filter(|r| r.key == 0).count();
        let cold = many.requests.iter().filter(|r| r.key == 999).count();
        assert!(hot > 5 * 100, "hottest key exceeds the limit: {hot}");
        assert!(cold < 100, "a cold key does not: {cold}");
    }

    #[test]
    fn refuses_huge_and_too_short_traces() {
        let huge = TrafficSpec { limit: u32::MAX, ..spec() };
        assert!(generate(Pattern::Steady, &huge).unwrap_err().to_string().contains("smaller"));
        let short = TrafficSpec { duration_ms: 60_000, ..spec() };
        assert!(generate(Pattern::Boundary, &short).is_err());
    }
}
