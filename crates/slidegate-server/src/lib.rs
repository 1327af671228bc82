//! slidegate's rate-limit service, as a library: exact sliding windows
//! behind Envoy's rate-limit protocol (RLS v3 over gRPC), envoy
//! ratelimit's JSON form, and slidegate's own HTTP API — configured with
//! envoy ratelimit's YAML, unchanged, plus slidegate's extensions.
//!
//! The `slidegate serve` command is a thin shim over [`serve`]; tests start
//! the service in-process on port 0:
//!
//! ```no_run
//! use slidegate::MemoryStore;
//! use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
//! use tokio::net::TcpListener;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ServerConfig::new("rules.yaml", ServiceStore::Memory(MemoryStore::new()));
//! let listeners = Listeners::new(
//!     Some(TcpListener::bind("127.0.0.1:8081").await?),
//!     Some(TcpListener::bind("127.0.0.1:8080").await?),
//! );
//! serve(config, listeners, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
//!
//! # The public names
//!
//! What `slidegate serve` and an embedding program need, and no more:
//!
//! * [`serve`] runs the service until a shutdown future completes, with a
//!   [`ServerConfig`] (rules, gateway file, store, failure answer
//!   ([`OnStoreFailure`]), quota headers ([`HeaderFamilies`]), shadow mode,
//!   timeouts, and the process-wide knobs `metrics_recorder` and
//!   `tune_process`, off unless a program opts in) on [`Listeners`] the
//!   caller bound; it fails with a [`ServeError`];
//! * [`ServiceStore`]: the store choice (the embedded store or Redis);
//! * [`check_admin_token`]: what an admin token must be;
//!   [`DEFAULT_HEADER_TIMEOUT`] and [`MAX_BODY_BYTES`]: the bounds on a
//!   client's request head and body;
//! * [`config`]: the configuration checker — [`config::Config::load`] and
//!   [`config::GatewayConfig::load`] read and check rules and gateway files
//!   (every problem with line and column, [`config::ConfigErrors`]) into
//!   the model the service runs.
//!
//! # Rooms
//!
//! Each protocol goes one way down: a thin adapter in `api/` (RLS, the
//! JSON form, `/v1/check`, admin, status and page) or the gateway's routing
//! turns a request into limits to decide; `decide/` decides them through
//! the library's `Limiter` (shadow mode, the failure answer and weights
//! are the limiter's) and keeps the statistics; `runtime/` accepts
//! connections, exports metrics and reloads the configuration that
//! `config/` (the rules) and `gateway/` (routes, the proxy) compile.

mod api;
pub mod config;
mod decide;
mod gateway;
mod runtime;
mod serve;
mod store;

pub use api::MAX_BODY_BYTES;
pub use decide::OnStoreFailure;
pub use serve::{DEFAULT_HEADER_TIMEOUT, Listeners, ServeError, ServerConfig, check_admin_token, serve};
pub use slidegate_tower::headers::Families as HeaderFamilies;
pub use store::ServiceStore;
