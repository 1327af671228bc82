//! `slidegate replay`: a recorded trace in, one decision per request out.
//!
//! The trace's own timestamps are the clock (a [`ManualClock`] set to each
//! line's `at_ms`), so a replay gives the same answers on every run and on
//! every store — which is what makes it useful to compare stores and to pin
//! behaviour in tests.
//!
//! On Redis (client-clock mode, a fresh key prefix per run) the trace's
//! time decides when state may disappear, however slowly the input comes:
//! keys live for their charges' time in the trace plus
//! [`REPLAY_CLOCK_SKEW`] of the server's clock, and expire by themselves
//! after the run.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use slidegate::limits::MAX_TIME_MS;
use slidegate::store::{Request, Store};
use slidegate::{ManualClock, MemoryStore, Rule};

use crate::cli::ReplayArgs;
use slidegate_server::ServiceStore;

use crate::store_choice::{RedisOptions, StoreSpec, connect_redis, run_prefix};

/// The latest `at_ms` a trace may use: the last time every store decides
/// exactly ([`MAX_TIME_MS`], 2^43 - 1 ms, in the year 2248).
pub const MAX_AT_MS: u64 = MAX_TIME_MS;

/// How much longer than their charges count Redis keeps a replay's keys
/// (the store's [`max_clock_skew`](slidegate_redis::RedisStoreBuilder::max_clock_skew)):
/// trace time moves only as lines come, so the server's clock may run
/// ahead of it by however long the input pauses. A day: a replay whose
/// input pauses longer may find state gone that the memory store keeps.
pub const REPLAY_CLOCK_SKEW: Duration = Duration::from_secs(24 * 3600);

/// One input line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceLine {
    at_ms: u64,
    key: String,
    #[serde(default = "one")]
    cost: u32,
}

fn one() -> u32 {
    1
}

/// One output line.
#[derive(Debug, Serialize)]
struct DecisionLine<'a> {
    at_ms: u64,
    key: &'a str,
    allowed: bool,
    remaining: u32,
    retry_after_ms: u64,
}

/// What a replay did, for callers that want a summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Requests decided.
    pub requests: u64,
    /// Requests admitted.
    pub allowed: u64,
}

/// Runs `slidegate replay`.
///
/// # Errors
///
/// An invalid rule, an unreadable input, a malformed line (named by its
/// number), or a store failure.
pub async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let rule = args.rule.to_rule()?;
    let clock = ManualClock::new(0);
    let store = match &StoreSpec::from_many(&args.stores)? {
        StoreSpec::Memory => ServiceStore::Memory(MemoryStore::builder().clock(clock.clone()).build()),
        StoreSpec::Redis { url } => {
            let options = RedisOptions {
                prefix: Some(run_prefix("replay")),
                client_clock: Some((clock.clone(), REPLAY_CLOCK_SKEW)),
                response_timeout: Some(args.timeout),
                // On the client clock every check goes on its own anyway.
                no_auto_batch: true,
                ..RedisOptions::default()
            };
            ServiceStore::Redis(connect_redis(url, options).await?)
        }
    };
    let input: Box<dyn BufRead + Send> = match &args.input {
        Some(path) if path.as_os_str() != "-" => {
            let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            Box::new(BufReader::new(file))
        }
        _ => Box::new(BufReader::new(io::stdin())),
    };
    let output = BufWriter::new(io::stdout());
    match replay(&store, &clock, &rule, input, output).await {
        Err(e) if is_broken_pipe(&e) => Ok(()), // `slidegate replay | head` is fine
        other => other.map(|_| ()),
    }
}

/// The longest input line: room for a megabyte-sized key, while a file
/// without newlines cannot fill memory.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Reads the next line into `buffer` (without its line ending); `None` at
/// the end of the input.
fn read_line<'b>(input: &mut impl BufRead, buffer: &'b mut Vec<u8>) -> anyhow::Result<Option<&'b str>> {
    buffer.clear();
    // Room for the longest line and its CR LF; one byte more is too long.
    let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX) + 2;
    let read = Read::take(input, limit).read_until(b'\n', buffer).context("cannot read")?;
    if read == 0 {
        return Ok(None);
    }
    if buffer.last() == Some(&b'\n') {
        buffer.pop();
        if buffer.last() == Some(&b'\r') {
            buffer.pop();
        }
    }
    if buffer.len() > MAX_LINE_BYTES {
        bail!("longer than {} MiB", MAX_LINE_BYTES >> 20);
    }
    std::str::from_utf8(buffer).map(Some).map_err(|e| anyhow!("not UTF-8 ({e})"))
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|cause| cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

/// Decides every request of the trace read from `input` with `store` (whose
/// clock must be `clock`), writing one JSON line per request to `output`.
///
/// Blank lines are skipped. Lines must not go back in time: a replay
/// answers "what would the limiter have said", and a trace out of order
/// has no single answer.
///
/// # Errors
///
/// The first malformed line, as `line N: what is wrong`; a store failure,
/// also with its line number; or a failure to read or write.
pub async fn replay<S: Store>(
    store: &S,
    clock: &ManualClock,
    rule: &Rule,
    input: impl BufRead,
    mut output: impl Write,
) -> anyhow::Result<ReplaySummary> {
    let mut summary = ReplaySummary::default();
    let mut previous_at = 0;
    let mut input = input;
    let mut buffer = Vec::new();
    for number in 1.. {
        let Some(line) = read_line(&mut input, &mut buffer).with_context(|| format!("line {number}"))? else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        let request = parse_line(line, rule, previous_at).with_context(|| format!("line {number}"))?;
        previous_at = request.at_ms;
        clock.set(request.at_ms);
        let valid =
            Request::new(rule, &request.key, request.cost).with_context(|| format!("line {number}"))?;
        let decision = store.check(&valid).await.with_context(|| format!("line {number}"))?;
        let out = DecisionLine {
            at_ms: request.at_ms,
            key: &request.key,
            allowed: decision.allowed,
            remaining: decision.remaining,
            retry_after_ms: whole_ms(decision.retry_after),
        };
        serde_json::to_writer(&mut output, &out).context("cannot write output")?;
        output.write_all(b"\n").context("cannot write output")?;
        summary.requests += 1;
        summary.allowed += u64::from(decision.allowed);
    }
    output.flush().context("cannot write output")?;
    Ok(summary)
}

/// Parses and checks one non-blank line.
fn parse_line(line: &str, rule: &Rule, previous_at: u64) -> anyhow::Result<TraceLine> {
    let request: TraceLine = serde_json::from_str(line).map_err(|e| {
        // serde_json says "at line 1": every line is its own document here, so
        // keep only the column and let the caller name the trace line.
        let message = e.to_string();
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m);
        match e.classify() {
            Category::Syntax | Category::Eof => anyhow!("invalid JSON: {message} at column {}", e.column()),
            Category::Data | Category::Io => anyhow!("{message} (column {})", e.column()),
        }
    })?;
    if request.key.is_empty() {
        bail!("key must not be empty");
    }
    if request.at_ms > MAX_AT_MS {
        bail!(
            "at_ms {} is too large (at most {MAX_AT_MS}: the last time every store decides exactly)",
            request.at_ms
        );
    }
    if request.at_ms < previous_at {
        bail!(
            "at_ms {} is earlier than the previous line's {previous_at}; a trace must be in time order",
            request.at_ms
        );
    }
    if request.cost == 0 {
        bail!("cost must be at least 1");
    }
    if request.cost > rule.limit() {
        bail!("cost {} exceeds the limit {} and could never be admitted", request.cost, rule.limit());
    }
    Ok(request)
}

fn whole_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule::new(3, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn parses_optional_cost() {
        let line = parse_line(r#"{"at_ms": 5, "key": "a"}"#, &rule(), 0).unwrap();
        assert_eq!((line.at_ms, line.key.as_str(), line.cost), (5, "a", 1));
        let line = parse_line(r#"{"at_ms": 5, "key": "a", "cost": 3}"#, &rule(), 5).unwrap();
        assert_eq!(line.cost, 3);
    }

    #[test]
    fn malformed_lines_say_why() {
        let cases = [
            ("{", "EOF"),
            (r#"{"key": "a"}"#, "missing field `at_ms`"),
            (r#"{"at_ms": 1}"#, "missing field `key`"),
            (r#"{"at_ms": -1, "key": "a"}"#, "invalid value: integer `-1`"),
            (r#"{"at_ms": 1, "key": "a", "cost": -2}"#, "invalid value: integer `-2`"),
            (r#"{"at_ms": 1, "key": ""}"#, "key must not be empty"),
            (r#"{"at_ms": 1, "key": "a", "cost": 0}"#, "cost must be at least 1"),
            (r#"{"at_ms": 1, "key": "a", "cost": 4}"#, "exceeds the limit 3"),
            (r#"{"at_ms": 1, "key": "a", "cots": 1}"#, "unknown field `cots`"),
            (r#"{"at_ms": 9007199254740992, "key": "a"}"#, "too large"),
            (r#"{"at_ms": 8796093022208, "key": "a"}"#, "at most 8796093022207"),
        ];
        for (line, needle) in cases {
            let err = parse_line(line, &rule(), 0).unwrap_err().to_string();
            assert!(err.contains(needle), "{line}: {err:?} should contain {needle:?}");
            assert!(!err.contains("at line 1"), "{err}");
        }
        let err = parse_line(r#"{"at_ms": 1, "key": "a"}"#, &rule(), 2).unwrap_err();
        assert!(err.to_string().contains("time order"), "{err}");
    }
}
