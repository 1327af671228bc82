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
//! * [`config`] — the rules: envoy ratelimit's format, its matching, the
//!   extensions (`algorithm`, `window`, `rate_limits`, `penalty`);
//! * [`Decider`] — a request's matched limits decided together, all or
//!   nothing, through the library's one decision path;
//! * the APIs: RLS v3 (`envoy.service.ratelimit.v3.RateLimitService`, with
//!   gRPC health), `POST /json`, `POST /v1/check`, `POST /v1/peek`,
//!   `GET /v1/status`, `GET /v1/rules`, `/healthz`, `/readyz`, `/metrics`,
//!   and `POST /v1/reload` with an admin token;
//! * hot reload of the rules (file watch, `SIGHUP`, the admin API), a bad
//!   file never unloading the good configuration.

pub mod config;
mod connection_io;
mod decide;
mod gateway;
mod http;
mod reload;
mod request;
mod rls;
mod server;
pub mod stats;
mod status;
mod store;
mod telemetry;

pub use decide::{Decider, OnStoreFailure};
pub use http::MAX_BODY_BYTES;
pub use reload::{Reloader, Watch};
pub use request::{
    CheckAnswer, CheckError, CheckRequest, Code, DescriptorStatus, LimitOverride, LimitStatus,
    MAX_DESCRIPTORS, MAX_ENTRIES, MAX_ENTRY_BYTES, Mode, RequestDescriptor,
};
pub use rls::Rls;
pub use server::{
    DEFAULT_HEADER_TIMEOUT, Listeners, MIN_ADMIN_TOKEN_LEN, ServeError, ServerConfig, check_admin_token,
    serve,
};
pub use slidegate_tower::headers::Families as HeaderFamilies;
pub use status::{ReloadRecord, ServiceStatus};
pub use store::ServiceStore;
pub use telemetry::MAX_VALUE_KEYS;
