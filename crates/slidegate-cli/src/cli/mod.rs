//! The command line, as clap types. Every flag's `///` is its `--help` text.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use slidegate::FailurePolicy;

pub mod serve;
pub mod target;

use crate::rule_args::{RuleArgs, parse_duration};
use crate::simulate::traffic::Pattern;
use crate::store_choice::{StoreSpec, parse_key_prefix};

/// The help heading of `bench`'s flags for the limiter in this process,
/// which `--target` refuses.
const LIMITER_FLAGS: &str = "The limiter in this process (not with --target)";

/// The longest `bench --duration`: a benchmark is a measurement, not a load
/// generator left running by accident.
pub const MAX_BENCH_DURATION: Duration = Duration::from_secs(600);

/// The most `bench --requests`.
pub const MAX_BENCH_REQUESTS: u64 = 1_000_000_000;

/// slidegate: exact sliding-window rate limiting. Serve rate limits to
/// Envoy and any service (and as a gateway), replay traces, compare
/// algorithms on generated traffic, and benchmark stores and services.
#[derive(Debug, Parser)]
#[command(name = "slidegate", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Worker threads the async runtime should have, when the command asks
    /// for a number (`bench --threads`).
    pub fn worker_threads(&self) -> Option<usize> {
        match &self.command {
            Command::Bench(args) => args.threads.and_then(|n| usize::try_from(n).ok()),
            _ => None,
        }
    }

    /// Whether the command serves or drives requests over connections,
    /// answered in batches (`serve`, `bench --target`): its runtime runs
    /// without the LIFO slot, where tokio's unstable API allows it.
    pub fn serves_batches(&self) -> bool {
        match &self.command {
            Command::Serve(_) => true,
            Command::Bench(args) => args.service.target.is_some(),
            _ => false,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a JSON-lines trace through a store, with the trace's timestamps
    /// as the clock, printing one decision per request.
    Replay(ReplayArgs),
    /// Run every algorithm on the same generated traffic and compare how much
    /// each admits in a true sliding window.
    Simulate(SimulateArgs),
    /// Measure decisions per second and latency of a store, or of a running
    /// service or gateway (`--target`).
    Bench(Box<BenchArgs>),
    /// Run the rate-limit service (Envoy RLS v3 over gRPC, an HTTP API, a
    /// status page) and, with `--gateway`, a rate-limiting reverse proxy.
    Serve(Box<serve::ServeArgs>),
}

/// `slidegate replay`.
///
/// Input lines look like `{"at_ms": 1500, "key": "alice", "cost": 2}` (cost
/// is optional, default 1; `at_ms` must not decrease and is at most
/// 8796093022207, 2^43 - 1, the last time every store decides exactly).
/// Output lines look like
/// `{"at_ms":1500,"key":"alice","allowed":true,"remaining":3,"retry_after_ms":0}`.
/// Every store gives the same answers at any pace of input (on Redis, state
/// is kept for a day of real time past what the trace's time needs).
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Where state lives: `memory`, or a Redis URL — `redis://host:port/`,
    /// `redis+cluster://host:port,host:port/` or
    /// `redis+sentinel://host:port,host:port/<primary>`; given several
    /// times, `redis://` URLs of the nodes of one Cluster (a fresh key
    /// prefix is used for every run).
    #[arg(long = "store", value_name = "STORE", default_value = "memory", action = clap::ArgAction::Append)]
    pub stores: Vec<StoreSpec>,

    /// The rule every request is checked against.
    #[command(flatten)]
    pub rule: RuleArgs,

    /// Read the trace from this file instead of standard input (`-` is standard input).
    #[arg(long)]
    pub input: Option<PathBuf>,

    /// Deadline of each Redis call. Generous by default: a replay is about
    /// exact answers, not latency.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub timeout: Duration,
}

/// A baseline for `bench --baseline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    /// ZREMRANGEBYSCORE + ZCARD + ZADD(ts, ts-random) + EXPIRE with the
    /// client's clock: the script people copy from blog posts.
    NaiveZset,
    /// One `PING` per check, always admitted: what a round trip per check
    /// costs by itself (connection, scheduling, the server's event loop).
    Ping,
}

/// Which traffic `simulate` generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatternArg {
    /// Every pattern, one table each.
    All,
    /// A full quota just before and another just after each fixed-window boundary.
    Boundary,
    /// A steady stream at 1.5× the limit.
    Steady,
    /// On-off bursts at 4× the limit, averaging about the limit.
    Bursty,
    /// 1000 keys with Zipf-distributed load; the hottest ones exceed the limit.
    ManyKeys,
}

impl PatternArg {
    /// The patterns to run, in display order.
    pub fn patterns(self) -> Vec<Pattern> {
        match self {
            PatternArg::All => Pattern::ALL.to_vec(),
            PatternArg::Boundary => vec![Pattern::Boundary],
            PatternArg::Steady => vec![Pattern::Steady],
            PatternArg::Bursty => vec![Pattern::Bursty],
            PatternArg::ManyKeys => vec![Pattern::ManyKeys],
        }
    }
}

/// `slidegate simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Traffic pattern to generate.
    #[arg(long, value_enum, default_value_t = PatternArg::All)]
    pub pattern: PatternArg,

    /// Most requests admitted per window, per key.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,

    /// Window length, e.g. `1s`, `1m`.
    #[arg(long, value_parser = parse_duration, default_value = "1m")]
    pub window: Duration,

    /// Buckets per window of the sliding counter.
    #[arg(long, default_value_t = 10)]
    pub buckets: u16,

    /// Length of the generated traffic [default: 5 windows].
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Seed of the traffic generator; the same seed gives the same traffic.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Also draw admitted requests per trailing window over time to this SVG
    /// file (with `--pattern all`, one panel per pattern).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// How `bench` picks the key of each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyOrder {
    /// Uniformly random over the keys.
    Random,
    /// Each key in turn.
    RoundRobin,
}

/// Which entry point `bench` sends its checks through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Entry {
    /// `Limiter::check_n`, the library call.
    Check,
    /// An HTTP request through an axum `Router` with a `RateLimitLayer`
    /// of the rule keyed by the `x-user` header, in-process (tower
    /// `oneshot`, no socket): what a web service's requests take.
    Layer,
    /// The same layer with three rules: a global one and one per client
    /// address (`x-ip`, 1,000 addresses), both sliding counters with room
    /// to spare, and the rule per user.
    LayerThreeRules,
    /// `Limiter::charge`: each decision a charge recorded whatever remains
    /// (a budget's cost learnt after the request).
    Charge,
    /// `Limiter::acquire` then `Lease::release`: each decision a
    /// concurrency lease (the rule's limit at once, its window the lease's
    /// ttl) taken and given back.
    Acquire,
    /// `Limiter::reserve` of the cost then `Reservation::commit` at the
    /// same cost: each decision a reservation held and settled.
    Reserve,
}

/// When `bench` stops: exactly one of the two.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct BenchBound {
    /// Stop after this many decisions in total (at most 1e9; a run that
    /// takes longer than 10m stops there and says so).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_BENCH_REQUESTS))]
    pub requests: Option<u64>,

    /// Stop after this long, e.g. `10s` (at most 10m).
    #[arg(long, value_parser = parse_bench_duration)]
    pub duration: Option<Duration>,
}

/// `slidegate bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Where state lives: `memory`, or a Redis URL — `redis://host:port/`,
    /// `redis+cluster://host:port,host:port/` or
    /// `redis+sentinel://host:port,host:port/<primary>`; given several
    /// times, `redis://` URLs of the nodes of one Cluster (a fresh key
    /// prefix is used for every run unless `--prefix` is given; the Redis
    /// server's clock decides).
    #[arg(long = "store", help_heading = LIMITER_FLAGS, value_name = "STORE", default_value = "memory", action = clap::ArgAction::Append)]
    pub stores: Vec<StoreSpec>,

    /// Cost of every request (at least 1, at most `--limit`).
    #[arg(long, help_heading = LIMITER_FLAGS, default_value_t = 1)]
    pub cost: u32,

    /// Redis key prefix to use instead of a fresh random one, so that
    /// several bench processes share keys (1 to 64 bytes; no whitespace,
    /// control characters or braces).
    #[arg(long, help_heading = LIMITER_FLAGS, value_parser = parse_key_prefix)]
    pub prefix: Option<String>,

    /// How the limiter answers when the store fails, is slower than
    /// `--deadline`, or the circuit breaker is open.
    #[arg(
        long,
        help_heading = LIMITER_FLAGS,
        default_value = "fallback",
        value_parser = PossibleValuesParser::new(["fail-open", "fail-closed", "fallback"])
            .try_map(|text| text.parse::<FailurePolicy>()),
    )]
    pub policy: FailurePolicy,

    /// The limiter's deadline for one store call; a slower call is answered
    /// by `--policy` [default: 50ms, the library's; at most 10s].
    #[arg(long, help_heading = LIMITER_FLAGS, value_parser = parse_deadline)]
    pub deadline: Option<Duration>,

    /// Turn off the limiter's deny cache: every denial asks the store.
    #[arg(long, help_heading = LIMITER_FLAGS)]
    pub no_deny_cache: bool,

    /// Turn off the limiter's circuit breaker: every check asks the store,
    /// however often it fails.
    #[arg(long, help_heading = LIMITER_FLAGS)]
    pub no_breaker: bool,

    /// Turn off the Redis store's auto-batching: every check is its own
    /// script call, even while others are in flight.
    #[arg(long, help_heading = LIMITER_FLAGS)]
    pub no_auto_batch: bool,

    /// The entry point the checks go through.
    #[arg(long, help_heading = LIMITER_FLAGS, value_enum, default_value_t = Entry::Check)]
    pub entry: Entry,

    /// Number of distinct keys requests are spread over.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub keys: u64,

    /// Number of concurrent tasks issuing checks (at most 1024: each keeps
    /// a latency histogram of ~140 KB).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,

    /// When to stop.
    #[command(flatten)]
    pub bound: BenchBound,

    /// Open loop: offer this many decisions per second in total, on a fixed
    /// schedule, whatever the answers' speed (at most `--concurrency` in
    /// flight), released every 100 µs by a pacer thread. Latency counts
    /// from the moment a request was due, so time a request waited behind
    /// slow ones is included. Without it the run is
    /// closed-loop: every task asks again as soon as it is answered.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Worker threads of the async runtime [default: one per core].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,

    /// How each request picks its key.
    #[arg(long, value_enum, default_value_t = KeyOrder::Random)]
    pub key_order: KeyOrder,

    /// Seed of the random key choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Response timeout of the Redis connection, for each reply [default:
    /// the store's own; at most 10s]. The limiter's `--deadline` bounds
    /// every check as well: the shorter of the two wins.
    #[arg(long, help_heading = LIMITER_FLAGS, value_parser = parse_deadline)]
    pub timeout: Option<Duration>,

    /// Print one JSON object instead of the human summary (no progress bar).
    #[arg(long)]
    pub json: bool,

    /// Instead of slidegate's script, run this baseline through the same
    /// client stack (needs a standalone `redis://` store): `naive-zset` is
    /// the ZSET sliding window of the source articles, `ping` a `PING` per
    /// check (a round trip per check, unbatched).
    #[arg(long, help_heading = LIMITER_FLAGS, value_enum)]
    pub baseline: Option<Baseline>,

    /// Also report the Redis server's side: CPU per script call (`INFO
    /// commandstats`, reset with `CONFIG RESETSTAT` before the run — use a
    /// server of your own) and `MEMORY USAGE` of a sample of the run's keys.
    /// Standalone `redis://` stores only.
    #[arg(long, help_heading = LIMITER_FLAGS)]
    pub redis_stats: bool,

    /// The rule every request is checked against (required unless
    /// `--target` drives a running service). Its flags are the limiter's
    /// (the heading is sticky: only the target's, below, follow it).
    #[command(flatten, next_help_heading = LIMITER_FLAGS)]
    pub rule: Option<RuleArgs>,

    /// A running service to drive instead (its flags under their own
    /// heading, last).
    #[command(flatten)]
    pub service: target::TargetArgs,
}

/// Highest `--rate` accepted (decisions per second).
const MAX_RATE: f64 = 100_000_000.0;

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE => Ok(rate),
        _ => Err(format!("must be a number of decisions per second, more than 0 and at most {MAX_RATE:e}")),
    }
}

/// The longest `bench --deadline` or `--timeout`: one check may never hold
/// a task for long.
const MAX_CHECK_WAIT: Duration = Duration::from_secs(10);

fn parse_deadline(text: &str) -> Result<Duration, String> {
    parse_up_to(text, MAX_CHECK_WAIT)
}

fn parse_bench_duration(text: &str) -> Result<Duration, String> {
    parse_up_to(text, MAX_BENCH_DURATION)
}

/// A duration more than 0 and at most `max`.
fn parse_up_to(text: &str, max: Duration) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration.is_zero() || duration > max {
        return Err(format!("must be more than 0 and at most {}", humantime::format_duration(max)));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests;
