//! What `bench --target` reports: the JSON object of `--json` (its common
//! fields named as in the limiter's report), and the human summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use clap::ValueEnum as _;
use hdrhistogram::Histogram;
use serde::Serialize;

use super::procstat::ProcessReport;
use super::{Run, seconds};
use crate::bench::report::{Latency, rate};
use crate::cli::BenchArgs;
use crate::cli::target::Target;

/// One second of the run (by when its requests were asked).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Second {
    /// Seconds since the start.
    pub second: u64,
    /// Requests asked in it.
    pub requests: u64,
    /// Of those, errors.
    pub errors: u64,
    /// Their latency.
    pub latency_us: Latency,
}

/// The outcome of one `bench --target` run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetReport {
    /// The URL driven.
    pub target: String,
    /// `grpc` or `http`.
    pub protocol: String,
    /// The RLS domain, if any.
    pub domain: Option<String>,
    /// The descriptors as given.
    pub descriptors: Vec<String>,
    /// The headers as given.
    pub headers: Vec<String>,
    /// Distinct keys.
    pub keys: u64,
    /// `random` or `round-robin`.
    pub key_order: String,
    /// Concurrent callers.
    pub concurrency: u64,
    /// Connections (HTTP/2 for gRPC; one per caller for HTTP/1.1).
    pub connections: u64,
    /// The request's `hits_addend`, if given.
    pub hits_addend: Option<u32>,
    /// Open-loop runs: requests offered per second.
    pub offered_per_sec: Option<f64>,
    /// Requests made (allowed + denied + errors).
    pub requests: u64,
    /// Answered `OK` / 2xx.
    pub allowed: u64,
    /// Answered `OVER_LIMIT` / 429.
    pub denied: u64,
    /// Got no decision.
    pub errors: u64,
    /// Errors by gRPC code name, HTTP status, or `transport`.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first message of each kind of error.
    pub error_messages: BTreeMap<String, String>,
    /// A `--requests` run stopped at the 10-minute limit first.
    pub stopped_at_time_limit: bool,
    /// Wall-clock time of the run, in seconds.
    pub elapsed_secs: f64,
    /// `requests / elapsed_secs`.
    pub decisions_per_sec: f64,
    /// Latency of every request, errors included.
    pub latency_us: Latency,
    /// Second by second.
    pub seconds: Vec<Second>,
    /// The `--pid` processes' CPU and memory.
    pub processes: Vec<ProcessReport>,
}

/// The report of `run`.
pub(super) fn build(
    target: &Target,
    args: &BenchArgs,
    run: &Run,
    elapsed: Duration,
    latency: &Histogram<u64>,
    processes: Vec<ProcessReport>,
) -> TargetReport {
    let (allowed, denied, errors) =
        (run.allowed.load(Relaxed), run.denied.load(Relaxed), run.errors.load(Relaxed));
    let requests = allowed + denied + errors;
    let failures = run.failures.lock().unwrap_or_else(|p| p.into_inner());
    let (protocol, connections) = match target {
        Target::Grpc { .. } => ("grpc", args.service.connections.unwrap_or(4).min(args.concurrency)),
        Target::Http { .. } => ("http", args.concurrency),
        Target::H2c { .. } => ("h2c", args.service.connections.unwrap_or(4).min(args.concurrency)),
    };
    TargetReport {
        target: target.to_string(),
        protocol: protocol.to_owned(),
        domain: args.service.domain.clone(),
        descriptors: args.service.descriptors.clone(),
        headers: args.service.headers.clone(),
        keys: args.keys,
        key_order: args.key_order.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned()),
        concurrency: args.concurrency,
        connections,
        hits_addend: args.service.hits_addend,
        offered_per_sec: args.rate,
        requests,
        allowed,
        denied,
        errors,
        errors_by_kind: failures.iter().map(|(kind, (count, _))| (kind.clone(), *count)).collect(),
        error_messages: failures.iter().map(|(kind, (_, message))| (kind.clone(), message.clone())).collect(),
        stopped_at_time_limit: run.time_limited.load(Relaxed),
        elapsed_secs: elapsed.as_secs_f64(),
        decisions_per_sec: rate(requests, elapsed),
        latency_us: Latency::of(latency),
        seconds: seconds(run),
        processes,
    }
}

impl TargetReport {
    /// The summary for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "slidegate bench: {}", self.target);
        let what = match &self.domain {
            Some(domain) => format!("domain {domain}, descriptors {}", self.descriptors.join(" | ")),
            None => format!("headers {}", self.headers.join(" | ")),
        };
        let _ = write!(
            out,
            "  {what}; {} keys ({}), {} concurrent, {} connections",
            self.keys, self.key_order, self.concurrency, self.connections
        );
        match self.offered_per_sec {
            Some(rate) => {
                let _ = writeln!(out, ", open loop at {rate:.0}/s\n");
            }
            None => out.push_str("\n\n"),
        }
        let _ = writeln!(out, "  {:<13} {} in {:.3} s", "requests", self.requests, self.elapsed_secs);
        let _ = writeln!(out, "  {:<13} {:.0} decisions/s", "throughput", self.decisions_per_sec);
        let _ = writeln!(out, "  {:<13} {}", "allowed", self.allowed);
        let _ = writeln!(out, "  {:<13} {}", "denied", self.denied);
        let kinds: Vec<String> = self.errors_by_kind.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
        let _ = writeln!(
            out,
            "  {:<13} {}{}",
            "errors",
            self.errors,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) }
        );
        let l = &self.latency_us;
        let _ = writeln!(
            out,
            "  {:<13} p50 {}  p99 {}  p99.9 {}  max {}  mean {:.1}",
            "latency (µs)", l.p50, l.p99, l.p999, l.max, l.mean
        );
        for process in &self.processes {
            let _ = writeln!(
                out,
                "  {:<13} {} ({}): {:.1} µs CPU per decision, {:.0} % of a core, RSS {:.1} MiB (peak {:.1} MiB)",
                "process",
                process.name,
                process.pid,
                process.cpu_us_per_decision,
                process.cpu_share * 100.0,
                process.rss_bytes as f64 / 1048576.0,
                process.peak_rss_bytes as f64 / 1048576.0
            );
        }
        if self.stopped_at_time_limit {
            let _ =
                writeln!(out, "  {:<13} stopped at the time limit before all --requests were made", "note");
        }
        for (kind, message) in &self.error_messages {
            let _ = writeln!(out, "  first {kind} error: {message}");
        }
        out
    }
}
