//! `slidegate serve`: parses nothing itself (clap did), builds the store
//! and listeners, and hands over to [`slidegate_server::serve`].

use anyhow::{Context, bail};
use slidegate::{FailurePolicy, MemoryStore};
use slidegate_server::config::{Config, GatewayConfig};
use slidegate_server::{HeaderFamilies, Listeners, OnStoreFailure, ServerConfig, ServiceStore};
use tokio::net::TcpListener;

use crate::cli::serve::{HeadersArg, Listen, LogFormat, OnFailureArg, PolicyArg, ServeArgs};
use crate::store_choice::{RedisOptions, StoreSpec, connect_redis};

/// Runs `slidegate serve` until SIGINT or SIGTERM.
///
/// # Errors
///
/// Invalid rules (every problem listed), a store that cannot be reached,
/// an address that cannot be bound.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.check {
        return check(&args);
    }
    init_logging(args.log_format);
    let store = match StoreSpec::from_many(&args.stores)? {
        StoreSpec::Memory if args.tls_ca_file.is_some() => bail!("--tls-ca-file applies to a Redis --store"),
        StoreSpec::Memory => ServiceStore::Memory(MemoryStore::new()),
        StoreSpec::Redis { url } => {
            let options = RedisOptions {
                prefix: args.prefix.clone(),
                tls_ca_file: args.tls_ca_file.clone(),
                // Redis down at start is an outage like any other: the
                // service starts and answers by its policy meanwhile. What
                // waiting cannot heal (TLS, credentials) stops the start.
                lazy: true,
                ..RedisOptions::default()
            };
            ServiceStore::Redis(connect_redis(&url, options).await?)
        }
    };
    let admin_token = match &args.admin_token_file {
        None => None,
        Some(file) => {
            let token = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the admin token file {}", file.display()))?;
            let token = token.trim().to_owned();
            if let Err(problem) = slidegate_server::check_admin_token(&token) {
                bail!("{}: {problem}", file.display());
            }
            Some(token)
        }
    };
    let mut config = match (&args.rules, &args.gateway) {
        (Some(rules), gateway) => {
            let mut config = ServerConfig::new(rules.clone(), store);
            config.gateway = gateway.clone();
            config
        }
        (None, Some(gateway)) => ServerConfig::for_gateway(gateway.clone(), store),
        (None, None) => bail!("give --rules, --gateway or both"),
    };
    config.deadline = args.deadline;
    config.policy = match args.policy {
        PolicyArg::Fallback => FailurePolicy::Fallback,
        PolicyArg::FailOpen => FailurePolicy::FailOpen,
        PolicyArg::FailClosed => FailurePolicy::FailClosed,
    };
    config.on_store_failure = match args.on_store_failure {
        OnFailureArg::Policy => OnStoreFailure::Policy,
        OnFailureArg::Unavailable => OnStoreFailure::Unavailable,
    };
    config.headers = match args.headers {
        HeadersArg::None => HeaderFamilies::new(false, false, false),
        HeadersArg::Ietf => HeaderFamilies::new(true, false, false),
        HeadersArg::Legacy => HeaderFamilies::new(false, true, false),
        HeadersArg::Both => HeaderFamilies::new(true, true, false),
    };
    config.shadow = args.shadow;
    config.deny_cache = !args.no_deny_cache;
    config.admin_token = admin_token;
    config.grace = args.grace;
    config.header_timeout = args.header_timeout;
    // The process is the service's own: its metrics recorder, and reloads
    // that yield to the decisions around them.
    config.metrics_recorder = true;
    config.tune_process = true;
    config.watch = !args.no_watch;
    if args.grpc == Listen::Off && args.http == Listen::Off && args.gateway.is_none() {
        bail!("nothing to listen on: --grpc and --http are both `off` and there is no --gateway");
    }
    let mut listeners = Listeners::new(bind(args.grpc, "--grpc").await?, bind(args.http, "--http").await?);
    if args.gateway.is_some() {
        let gateway = bind(Listen::At(args.gateway_addr), "--gateway-addr").await?;
        listeners = listeners.with_gateway(gateway.context("--gateway-addr")?);
        if let Some(addr) = args.gateway_redirect_addr {
            let redirect = bind(Listen::At(addr), "--gateway-redirect-addr").await?;
            listeners = listeners.with_redirect(redirect.context("--gateway-redirect-addr")?);
        }
    } else if args.gateway_redirect_addr.is_some() {
        bail!("--gateway-redirect-addr redirects to the gateway's HTTPS: give --gateway too");
    }
    // Logged, so a JSON log holds JSON only.
    if let Some(grpc) = &listeners.grpc {
        let addr = grpc.local_addr()?;
        tracing::info!(target: "slidegate", "Envoy RLS v3 (gRPC) on {addr}");
    }
    if let Some(http) = &listeners.http {
        let addr = http.local_addr()?;
        tracing::info!(target: "slidegate", "HTTP API on http://{addr}");
    }
    if let Some(gateway) = &listeners.gateway {
        let addr = gateway.local_addr()?;
        tracing::info!(target: "slidegate", "gateway on {addr}");
    }
    if let Some(redirect) = &listeners.redirect {
        let addr = redirect.local_addr()?;
        tracing::info!(target: "slidegate", "plain HTTP on http://{addr}, redirected to the gateway's HTTPS");
    }
    slidegate_server::serve(config, listeners, shutdown_signal()).await?;
    tracing::info!(target: "slidegate", "stopped");
    Ok(())
}

/// `--check`: every problem of the rules and the gateway file, or a summary.
fn check(args: &ServeArgs) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    if let Some(rules) = &args.rules {
        match Config::load(rules) {
            Ok(config) => {
                let domains: Vec<&str> = config.domains().map(|d| d.name()).collect();
                println!(
                    "{}: ok ({} file(s), domains: {}, hash {})",
                    rules.display(),
                    config.files().len(),
                    domains.join(", "),
                    config.hash()
                );
                if let Some(request) = &args.explain {
                    let request: Sample = serde_json::from_str(request).context("--explain")?;
                    let descriptors: Vec<Vec<(String, String)>> = request
                        .descriptors
                        .into_iter()
                        .map(|d| d.entries.into_iter().map(|e| (e.key, e.value)).collect())
                        .collect();
                    for line in config.explain(&request.domain, &descriptors) {
                        println!("{line}");
                    }
                }
            }
            Err(errors) => problems.push(errors.to_string()),
        }
    }
    if let Some(gateway) = &args.gateway {
        match GatewayConfig::load(gateway) {
            Ok(config) => {
                let routes: Vec<&str> = config.routes.iter().map(|r| r.name.as_str()).collect();
                println!("{}: ok (routes: {}, hash {})", gateway.display(), routes.join(", "), config.hash);
                for warning in &config.warnings {
                    eprintln!("warning: {warning}");
                }
            }
            Err(errors) => problems.push(errors.to_string()),
        }
    }
    if problems.is_empty() { Ok(()) } else { bail!("{}", problems.join("\n")) }
}

/// `--explain`'s request: `POST /v1/check`'s body, the parts matching reads.
#[derive(serde::Deserialize)]
struct Sample {
    domain: String,
    #[serde(default)]
    descriptors: Vec<SampleDescriptor>,
}

#[derive(serde::Deserialize)]
struct SampleDescriptor {
    #[serde(default)]
    entries: Vec<SampleEntry>,
}

#[derive(serde::Deserialize)]
struct SampleEntry {
    key: String,
    #[serde(default)]
    value: String,
}

async fn bind(listen: Listen, flag: &str) -> anyhow::Result<Option<TcpListener>> {
    match listen {
        Listen::Off => Ok(None),
        Listen::At(addr) => Ok(Some(
            TcpListener::bind(addr).await.with_context(|| format!("{flag}: cannot listen on {addr}"))?,
        )),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!(target: "slidegate", "shutting down (requests in flight finish)");
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
