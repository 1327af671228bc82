//! Test support for slidegate (not published).
//!
//! * [`RedisServer`] spawns a real `redis-server` (or any compatible binary)
//!   on a free loopback port in a temporary directory and kills it on drop.
//!   Tests never use a server someone else started on `:6379`.
//! * [`RedisCluster`] does the same for a whole Redis Cluster (primaries
//!   and replicas), with helpers to kill a primary or reshard live.
//! * [`RedisSentinel`]: a primary, replicas and three sentinels.
//! * [`conformance`] is the one semantic test suite every
//!   [`Store`](slidegate::Store) must pass.
//!
//! ```no_run
//! let server = slidegate_testkit::RedisServer::start()?;
//! println!("connect to {}", server.url());
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod conformance;
mod redis_cluster;
mod redis_sentinel;
mod redis_server;

pub use redis_cluster::{ClusterNode, RedisCluster};
pub use redis_sentinel::{MASTER_NAME, RedisSentinel};
pub use redis_server::{RedisServer, RedisServerBuilder, free_port};
