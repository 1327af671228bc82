//! `slidegate serve`'s flags. Every flag has an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::rule_args::parse_duration;
use crate::store_choice::{StoreSpec, parse_key_prefix};

/// `slidegate serve`: the rate-limit service.
///
/// Envoy's rate-limit protocol (RLS v3) over gRPC, envoy ratelimit's JSON
/// form at `POST /json`, slidegate's own `POST /v1/check` and `/v1/peek`,
/// status, rules, health, readiness and Prometheus metrics over HTTP.
/// Rules are envoy ratelimit's YAML (a file or a directory), reloaded when
/// they change, on SIGHUP and on `POST /v1/reload`. With `--gateway`, it is
/// also a rate-limiting reverse proxy: routes to upstreams, each with its
/// limits.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("serves").args(["rules", "gateway"]).required(true).multiple(true)))]
pub struct ServeArgs {
    /// The rules: an envoy-ratelimit YAML file, or a directory of them
    /// (`*.yaml`, `*.yml`; names starting with `.` are skipped).
    #[arg(long, value_name = "FILE|DIR", env = "SLIDEGATE_RULES")]
    pub rules: Option<PathBuf>,

    /// Run as a gateway too: the routes, their upstreams and limits, from
    /// this YAML file (reloaded like the rules).
    #[arg(long, value_name = "FILE", env = "SLIDEGATE_GATEWAY")]
    pub gateway: Option<PathBuf>,

    /// The gateway's proxy listens here (with `--gateway`).
    #[arg(long, value_name = "ADDR", env = "SLIDEGATE_GATEWAY_ADDR", default_value = "0.0.0.0:8000")]
    pub gateway_addr: SocketAddr,

    /// Only check the rules and the gateway file: print every problem, exit
    /// 0 when there is none, 1 otherwise.
    #[arg(long)]
    pub check: bool,

    /// Where counters live: `memory` (the default: one process), or a Redis
    /// URL — `redis://[user:password@]host:port/` (`rediss://` for TLS),
    /// `redis+cluster://host:port,host:port/` (`rediss+cluster://`),
    /// `redis+sentinel://host:port/<primary>`; given several times,
    /// `redis://` URLs of the nodes of one Cluster. Every service sharing
    /// the store shares the limits.
    #[arg(
        long = "store",
        value_name = "STORE",
        env = "SLIDEGATE_STORE",
        value_delimiter = ' ',
        action = clap::ArgAction::Append
    )]
    pub stores: Vec<StoreSpec>,

    /// A PEM file of the CA certificates to trust for TLS to Redis, instead
    /// of the system's roots.
    #[arg(long, value_name = "FILE", env = "SLIDEGATE_TLS_CA_FILE")]
    pub tls_ca_file: Option<PathBuf>,

    /// Key prefix in Redis (services sharing limits use the same one).
    #[arg(long, env = "SLIDEGATE_PREFIX", value_parser = parse_key_prefix)]
    pub prefix: Option<String>,

    /// Envoy RLS v3 and gRPC health listen here; `off` for none.
    #[arg(long, value_name = "ADDR|off", env = "SLIDEGATE_GRPC", default_value = "0.0.0.0:8081", value_parser = parse_listen)]
    pub grpc: Listen,

    /// The HTTP API listens here; `off` for none.
    #[arg(long, value_name = "ADDR|off", env = "SLIDEGATE_HTTP", default_value = "0.0.0.0:8080", value_parser = parse_listen)]
    pub http: Listen,

    /// How long one store call may take before the failure policy answers.
    #[arg(long, env = "SLIDEGATE_DEADLINE", value_parser = parse_duration, default_value = "50ms")]
    pub deadline: Duration,

    /// What answers when the store fails: a local limiter per process
    /// (`fallback`), admit (`fail-open`) or deny (`fail-closed`).
    #[arg(long, env = "SLIDEGATE_POLICY", value_enum, default_value_t = PolicyArg::Fallback)]
    pub policy: PolicyArg,

    /// On a store failure, answer by the policy (counted as degraded), or
    /// fail the request with gRPC `UNAVAILABLE` / HTTP 503 so the caller
    /// decides (Envoy's `failure_mode_deny`).
    #[arg(long, env = "SLIDEGATE_ON_STORE_FAILURE", value_enum, default_value_t = OnFailureArg::Policy)]
    pub on_store_failure: OnFailureArg,

    /// Quota headers added to answers (RLS `response_headers_to_add` and
    /// `/v1/check`): the IETF `RateLimit`/`RateLimit-Policy` fields, the
    /// legacy `X-RateLimit-*`, both or none; `Retry-After` when over the limit.
    #[arg(long, env = "SLIDEGATE_HEADERS", value_enum, default_value_t = HeadersArg::Both)]
    pub headers: HeadersArg,

    /// Global shadow mode: decide and count every limit, never deny.
    #[arg(long, env = "SLIDEGATE_SHADOW")]
    pub shadow: bool,

    /// Turn off the deny cache: every request a limit denies asks the
    /// store again, instead of being answered locally until its retry time.
    #[arg(long, env = "SLIDEGATE_NO_DENY_CACHE")]
    pub no_deny_cache: bool,

    /// A file holding the admin token (`Authorization: Bearer …` for
    /// `POST /v1/reload`); without one, there is no admin API.
    #[arg(long, value_name = "FILE", env = "SLIDEGATE_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,

    /// How long requests in flight may take to finish at shutdown.
    #[arg(long, env = "SLIDEGATE_GRACE", value_parser = parse_duration, default_value = "10s")]
    pub grace: Duration,

    /// How long a client may take to send a request's head, on every
    /// listener: a connection that sends nothing, or a request head too
    /// slowly, in that time is closed; so is a kept-alive HTTP/1.1
    /// connection idle that long between requests.
    #[arg(long, value_name = "DUR", env = "SLIDEGATE_HEADER_TIMEOUT", value_parser = parse_timeout, default_value = "30s")]
    pub header_timeout: Duration,

    /// Do not watch the rules for changes (SIGHUP and the admin API still reload).
    #[arg(long, env = "SLIDEGATE_NO_WATCH")]
    pub no_watch: bool,

    /// Log lines as text or as JSON objects.
    #[arg(long, env = "SLIDEGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// A listen address, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// Listen here.
    At(SocketAddr),
    /// Do not listen.
    Off,
}

fn parse_listen(text: &str) -> Result<Listen, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(Listen::Off);
    }
    text.parse()
        .map(Listen::At)
        .map_err(|_| format!("expected host:port (e.g. 0.0.0.0:8081) or `off`, got {text:?}"))
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// A local limiter in each process.
    Fallback,
    /// Admit.
    FailOpen,
    /// Deny.
    FailClosed,
}

/// `--on-store-failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnFailureArg {
    /// The failure policy answers.
    Policy,
    /// `UNAVAILABLE` / 503.
    Unavailable,
}

/// `--headers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HeadersArg {
    /// None.
    None,
    /// `RateLimit-Policy` and `RateLimit`.
    Ietf,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    /// Both families.
    Both,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A timeout: a duration above zero.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err("must be above zero".into()),
        timeout => Ok(timeout),
    }
}
