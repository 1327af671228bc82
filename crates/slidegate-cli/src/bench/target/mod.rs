//! `slidegate bench --target`: drives a running rate-limit service — any
//! Envoy RLS v3 server over gRPC, or an HTTP server over HTTP/1.1 or h2c
//! (slidegate's `/v1/check`, a gateway) — closed loop (`--concurrency` callers) or open
//! loop (`--rate`), and reports decisions per second, allowed and denied,
//! latency percentiles, errors by gRPC code or HTTP status, a per-second
//! timeline, and with `--pid` what the server process spent.

mod drive;
mod grpc;
mod h2c;
mod http;
mod link;
mod procstat;
mod report;
pub(crate) mod template;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context as _, bail};
use hdrhistogram::Histogram;
use rand::SeedableRng as _;
use rand::rngs::SmallRng;
use slidegate::BreakerState;
use tokio::sync::oneshot;

pub use procstat::ProcessReport;
pub use report::{Second, TargetReport};

use super::pacer::Pacer;
use super::plan::Bound;
use super::watch::{Watched, progress_bar, watch};
use crate::cli::target::Target;
use crate::cli::{BenchArgs, KeyOrder, MAX_BENCH_DURATION};
use drive::{drive, seconds};
use grpc::GrpcCaller;
use h2c::H2cCaller;
use http::{HttpCaller, HttpPlan};
use procstat::CpuSample;
use template::{parse_descriptor, parse_header};

/// Slowest latency the histograms hold exactly (60 s, in microseconds).
const MAX_LATENCY_US: u64 = 60_000_000;

/// A caller yields to the scheduler every this many calls, so callers
/// answered at once (an error, a local answer) share the threads.
const YIELD_EVERY: u32 = 64;

/// How a call was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `OK` / 2xx.
    Allowed,
    /// `OVER_LIMIT` / 429.
    Denied,
}

/// A call that got no decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What the report counts it under: a gRPC code name, an HTTP status,
    /// or `transport`.
    kind: String,
    /// What happened.
    message: String,
}

impl Failure {
    fn new(kind: String, message: &str) -> Failure {
        Failure { kind, message: message.to_owned() }
    }

    fn transport(message: String) -> Failure {
        Failure { kind: "transport".to_owned(), message }
    }
}

/// What the callers share.
struct Run {
    keys: u64,
    key_order: KeyOrder,
    bound: Bound,
    rate: Option<f64>,
    started: Instant,
    deadline: Instant,
    pacer: Option<Pacer>,
    issued: AtomicU64,
    completed: AtomicU64,
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
    time_limited: AtomicBool,
    /// Errors by kind, and the first of each kind's message.
    failures: Mutex<BTreeMap<String, (u64, String)>>,
    /// Per second of the run: requests, errors, latencies.
    timeline: Mutex<Vec<SecondTally>>,
}

/// One second of the run.
struct SecondTally {
    errors: u64,
    latency: Histogram<u64>,
}

/// The caller of one task.
enum Caller {
    Grpc(Box<GrpcCaller>),
    Http(Box<HttpCaller>),
    H2c(Box<H2cCaller>),
}

impl Caller {
    async fn call(&mut self, key: u64) -> Result<Answer, Failure> {
        match self {
            Caller::Grpc(caller) => caller.call(key).await,
            Caller::Http(caller) => caller.call(key).await,
            Caller::H2c(caller) => caller.call(key).await,
        }
    }
}

/// Opens `count` HTTP/2 connections to `authority`.
async fn open_links(authority: &str, count: u64, target: &Target) -> anyhow::Result<Vec<Arc<link::Link>>> {
    let mut links = Vec::new();
    for _ in 0..count {
        let send = link::connect(authority).await.with_context(|| format!("cannot connect to {target}"))?;
        links.push(Arc::new(link::Link::new(authority, send)));
    }
    Ok(links)
}

/// The connection of task `task`: round robin.
fn link_of(links: &[Arc<link::Link>], task: u64) -> &Arc<link::Link> {
    &links[usize::try_from(task % links.len() as u64).unwrap_or(0)]
}

/// The requests of an http:// or h2c:// target: the JSON check with
/// descriptors, else a GET with the headers.
fn http_plan(
    authority: &str,
    path: &str,
    headers: Vec<(::http::HeaderName, template::Template)>,
    descriptors: Vec<Vec<template::EntryTemplate>>,
    service: &crate::cli::target::TargetArgs,
) -> anyhow::Result<HttpPlan> {
    let check = match (&service.domain, descriptors.is_empty()) {
        (Some(domain), false) => Some((domain.clone(), descriptors)),
        (None, false) => bail!("--descriptor on an http:// or h2c:// target (a JSON check) needs --domain"),
        (Some(_), true) => {
            bail!("--domain on an http:// or h2c:// target needs --descriptor (the JSON check)")
        }
        (None, true) => None,
    };
    if check.is_none() && service.hits_addend.is_some() {
        bail!("--hits-addend on an http:// or h2c:// target needs --descriptor (the JSON check)");
    }
    Ok(HttpPlan {
        authority: authority.to_owned(),
        path: path.to_owned(),
        headers,
        check,
        hits_addend: service.hits_addend,
    })
}

/// Runs `slidegate bench --target` with `args`.
///
/// # Errors
///
/// Invalid or conflicting flags, or a target that cannot be connected to.
pub async fn run(target: Target, args: BenchArgs) -> anyhow::Result<()> {
    let limiter_only = limiter_flags(&args);
    if !limiter_only.is_empty() {
        bail!(
            "{} {} the in-process limiter, not --target (the service decides with its own configuration)",
            limiter_only.join(", "),
            if limiter_only.len() == 1 { "applies to" } else { "apply to" }
        );
    }
    let service = &args.service;
    let descriptors =
        service.descriptors.iter().map(|d| parse_descriptor(d)).collect::<anyhow::Result<Vec<_>>>()?;
    let headers = service.headers.iter().map(|h| parse_header(h)).collect::<anyhow::Result<Vec<_>>>()?;
    let bound = Bound::from_args(&args.bound)?;
    let connections = service.connections.unwrap_or(4);
    let mut callers = Vec::new();
    match &target {
        Target::Grpc { authority } => {
            let domain = service.domain.as_deref().context("a grpc:// target needs --domain")?;
            if descriptors.is_empty() {
                bail!("a grpc:// target needs at least one --descriptor, e.g. --descriptor 'user={{key}}'");
            }
            if !headers.is_empty() {
                bail!("--header applies to http:// and h2c:// targets");
            }
            let links = open_links(authority, connections.min(args.concurrency), &target).await?;
            for task in 0..args.concurrency {
                let caller = GrpcCaller::new(
                    Arc::clone(link_of(&links, task)),
                    authority,
                    domain,
                    &descriptors,
                    service.hits_addend.unwrap_or(0),
                )?;
                callers.push(Caller::Grpc(Box::new(caller)));
            }
        }
        Target::Http { authority, path } => {
            if service.connections.is_some() {
                bail!(
                    "--connections applies to grpc:// and h2c:// targets: an http:// target opens one per task"
                );
            }
            let plan = http_plan(authority, path, headers, descriptors, service)?;
            // Fail early, with the reason, if nothing listens there.
            tokio::net::TcpStream::connect(authority)
                .await
                .with_context(|| format!("cannot connect to {target}"))?;
            callers
                .extend((0..args.concurrency).map(|_| Caller::Http(Box::new(HttpCaller::new(plan.clone())))));
        }
        Target::H2c { authority, path } => {
            let plan = http_plan(authority, path, headers, descriptors, service)?;
            let links = open_links(authority, connections.min(args.concurrency), &target).await?;
            for task in 0..args.concurrency {
                let caller = H2cCaller::new(Arc::clone(link_of(&links, task)), plan.clone())?;
                callers.push(Caller::H2c(Box::new(caller)));
            }
        }
    }
    let samples = service.pids.iter().map(|&pid| CpuSample::take(pid)).collect::<anyhow::Result<Vec<_>>>()?;

    let started = Instant::now();
    let deadline = match bound {
        Bound::Duration(duration) => started + duration.min(MAX_BENCH_DURATION),
        Bound::Requests(_) => started + MAX_BENCH_DURATION,
    };
    let run = Arc::new(Run {
        keys: args.keys,
        key_order: args.key_order,
        bound,
        rate: args.rate,
        started,
        deadline,
        pacer: args.rate.map(|rate| Pacer::start(rate, started)).transpose()?,
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        allowed: AtomicU64::new(0),
        denied: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        time_limited: AtomicBool::new(false),
        failures: Mutex::new(BTreeMap::new()),
        timeline: Mutex::new(Vec::new()),
    });
    let show_progress = !args.json && std::io::stdout().is_terminal();
    let progress = progress_bar(bound, show_progress);
    let (stop, stopped) = oneshot::channel();
    let watched = Watched {
        progress: progress.clone(),
        bound,
        started,
        breaker: || BreakerState::Closed,
        completed: {
            let run = Arc::clone(&run);
            move || run.completed.load(Relaxed)
        },
    };
    let watcher = tokio::spawn(watch(watched, stopped));
    let template = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_US, 3).context("latency histogram")?;
    let tasks: Vec<_> = callers
        .into_iter()
        .enumerate()
        .map(|(task, caller)| {
            let rng = SmallRng::seed_from_u64(args.seed.wrapping_add(task as u64));
            tokio::spawn(drive(caller, Arc::clone(&run), rng, template.clone()))
        })
        .collect();
    let mut latency = template;
    for task in tasks {
        let histogram = task.await.context("a benchmark task failed")??;
        latency.add(&histogram).context("cannot merge latency histograms")?;
    }
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let _ = watcher.await;
    progress.finish_and_clear();

    let requests = run.allowed.load(Relaxed) + run.denied.load(Relaxed) + run.errors.load(Relaxed);
    let processes =
        samples.iter().map(|sample| sample.report(elapsed, requests)).collect::<anyhow::Result<Vec<_>>>()?;
    let report = report::build(&target, &args, &run, elapsed, &latency, processes);
    if args.json {
        println!("{}", serde_json::to_string(&report).context("cannot encode the report")?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

/// The limiter's flags `args` gives, which `--target` cannot honour.
fn limiter_flags(args: &BenchArgs) -> Vec<&'static str> {
    let mut given = Vec::new();
    let flags = [
        (args.rule.is_some(), "--limit/--window/--algorithm"),
        (args.stores.iter().any(|s| *s != crate::store_choice::StoreSpec::Memory), "--store"),
        (args.cost != 1, "--cost"),
        (args.prefix.is_some(), "--prefix"),
        (args.deadline.is_some(), "--deadline"),
        (args.no_deny_cache, "--no-deny-cache"),
        (args.no_breaker, "--no-breaker"),
        (args.no_auto_batch, "--no-auto-batch"),
        (args.entry != crate::cli::Entry::Check, "--entry"),
        (args.timeout.is_some(), "--timeout"),
        (args.baseline.is_some(), "--baseline"),
        (args.redis_stats, "--redis-stats"),
    ];
    for (is_given, name) in flags {
        if is_given {
            given.push(name);
        }
    }
    given
}
