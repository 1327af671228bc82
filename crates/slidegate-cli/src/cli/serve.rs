//! `slidegate serve`'s flags. Every flag has an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::BoolishValueParser;
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

    /// The gateway's proxy listens here (with `--gateway`); HTTPS when the
    /// gateway file has a `tls:` block.
    #[arg(long, value_name = "ADDR", env = "SLIDEGATE_GATEWAY_ADDR", default_value = "0.0.0.0:8000", value_parser = parse_addr)]
    pub gateway_addr: SocketAddr,

    /// Also listen here for plain HTTP, redirecting every request to the
    /// gateway's HTTPS (`308`, the same host and path; needs the gateway
    /// file's `tls:` block).
    #[arg(long, value_name = "ADDR", env = "SLIDEGATE_GATEWAY_REDIRECT_ADDR", value_parser = parse_addr)]
    pub gateway_redirect_addr: Option<SocketAddr>,

    /// Only check the rules and the gateway file: print every problem, exit
    /// 0 when there is none, 1 otherwise.
    #[arg(long)]
    pub check: bool,

    /// With `--check`: a request to explain, as `POST /v1/check` takes it
    /// (`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`):
    /// prints, per descriptor, the limits it would meet, or why none.
    #[arg(long, value_name = "JSON", requires_all = ["check", "rules"])]
    pub explain: Option<String>,

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
    #[arg(long, env = "SLIDEGATE_SHADOW", value_parser = BoolishValueParser::new())]
    pub shadow: bool,

    /// Turn off the deny cache: every request a limit denies asks the
    /// store again, instead of being answered locally until its retry time.
    #[arg(long, env = "SLIDEGATE_NO_DENY_CACHE", value_parser = BoolishValueParser::new())]
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
    #[arg(long, env = "SLIDEGATE_NO_WATCH", value_parser = BoolishValueParser::new())]
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
    parse_addr(text).map(Listen::At)
}

/// A listen address: `host:port` (an IP address, or a name resolved now:
/// its first IPv4 address, else its first), `[v6]:port`, or `:port` (every
/// IPv4 interface, as `0.0.0.0:port`).
pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let expected = || {
        format!(
            "expected host:port, [ipv6]:port or :port (e.g. 0.0.0.0:8081, localhost:8081, :8081), got {text:?}"
        )
    };
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(expected)?;
    let port: u16 = port.parse().map_err(|_| expected())?;
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if host.contains([':', '[', ']', '/']) || host.chars().any(char::is_whitespace) {
        return Err(expected());
    }
    let resolved: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("cannot resolve {host:?} (in {text:?}): {e}"))?
        .collect();
    resolved
        .iter()
        .find(|addr| addr.is_ipv4())
        .or(resolved.first())
        .copied()
        .ok_or_else(|| format!("{host:?} (in {text:?}) resolves to no address"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_in_every_form() {
        let addr = |text: &str| text.parse::<SocketAddr>().expect("an address");
        assert_eq!(parse_addr("0.0.0.0:8081"), Ok(addr("0.0.0.0:8081")));
        assert_eq!(parse_addr("[::1]:8081"), Ok(addr("[::1]:8081")));
        assert_eq!(parse_addr(":8081"), Ok(addr("0.0.0.0:8081")));
        assert_eq!(parse_addr("localhost:8081"), Ok(addr("127.0.0.1:8081")));
        for bad in ["8081", "localhost", ":", ":99999", "a b:80", "[::1:80", "http://x:80", ""] {
            let error = parse_addr(bad).expect_err(bad);
            assert!(error.contains("expected host:port"), "{bad}: {error}");
        }
        assert_eq!(parse_listen("OFF"), Ok(Listen::Off));
    }
}
