//! Test support for slidegate (not published).
//!
//! * [`RedisServer`] spawns a real `redis-server` (or any compatible binary)
//!   on a free loopback port in a temporary directory and kills it on drop.
//!   Tests never use a server someone else started on `:6379`.
//! * [`RedisCluster`] does the same for a whole Redis Cluster (primaries
//!   and replicas), with helpers to kill a primary or reshard live.
//! * [`RedisSentinel`]: a primary, replicas and three sentinels.
//! * [`TcpProxy`]: a proxy whose open connections can be made to go
//!   silent, or to receive garbage, while new ones pass.
//! * [`FakeClock`]: a wall clock a test sets, for a server run on it
//!   (libfaketime), so the server's clock can be driven like a client's.
//! * [`CapturedLog`]: what `tracing` logs during a test, to count lines.
//! * [`Upstream`]: the one test upstream for proxies under test, an HTTP
//!   server (HTTP/1.1 and h2c, WebSocket) on a free port that echoes what
//!   it receives, streams, counts and waits on request, and counts
//!   requests and connections.
//! * [`envoy_binary`], [`Envoy`]: the real Envoy the tests run.
//! * [`conformance`] is the one semantic test suite every
//!   [`Store`](slidegate::Store) must pass.
//!
//! ```no_run
//! let server = slidegate_testkit::RedisServer::start()?;
//! println!("connect to {}", server.url());
//! # Ok::<(), std::io::Error>(())
//! ```

mod captured_log;
mod cluster_nodes;
pub mod conformance;
mod envoy;
mod fake_clock;
mod redis_cluster;
mod redis_sentinel;
mod redis_server;
mod tcp_proxy;
mod tls;
mod upstream;

pub use captured_log::CapturedLog;
pub use cluster_nodes::ClusterNode;
pub use envoy::{Envoy, envoy_binary, envoy_config_on};
pub use fake_clock::{FakeClock, libfaketime};
pub use redis_cluster::RedisCluster;
pub use redis_sentinel::{MASTER_NAME, RedisSentinel};
pub use redis_server::{RedisServer, RedisServerBuilder, free_port};
pub use tcp_proxy::TcpProxy;
pub use tls::{Pki, TestCa, TlsServer};
pub use upstream::{Upstream, UpstreamBuilder};
