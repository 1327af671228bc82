//! The setup of the property tests comparing the Redis store with the
//! model: a Redis server and the clock its stores decide on.

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use slidegate::ManualClock;
use slidegate_redis::RedisStore;
use slidegate_testkit::conformance::START_MS;
use slidegate_testkit::{FakeClock, RedisServer};

/// Whose clock a store decides on, and the means to set it.
enum Clock {
    /// Client-clock mode: the store sends this clock's time.
    Client(ManualClock),
    /// The Redis server's clock (the server runs on this fake clock).
    Server(FakeClock),
}

/// A Redis server and the clock its stores decide on.
pub struct Setup {
    server: RedisServer,
    clock: Clock,
}

impl Setup {
    pub fn new(server_clock: bool) -> Setup {
        if server_clock {
            let clock = FakeClock::new(START_MS).expect("a fake clock (apt-get install faketime)");
            // Valkey: Debian's redis-server cannot start under libfaketime.
            let valkey = RedisServer::builder().binary(super::valkey_server());
            let server = clock.apply(valkey).start().expect("start valkey-server on a fake clock");
            let setup = Setup { server, clock: Clock::Server(clock) };
            setup.expect_server_time(START_MS + 999);
            setup.expect_server_time(START_MS);
            setup
        } else {
            Setup { server: super::server(), clock: Clock::Client(ManualClock::new(START_MS)) }
        }
    }

    /// Sets the time the next decisions are made at.
    pub fn set(&self, ms: u64) {
        match &self.clock {
            Clock::Client(clock) => clock.set(ms),
            Clock::Server(clock) => clock.set(ms).expect("set the server's clock"),
        }
    }

    /// Sets the server's clock to `ms` and checks that `TIME` reads it.
    fn expect_server_time(&self, ms: u64) {
        self.set(ms);
        let mut conn =
            redis::Client::open(self.server.url()).and_then(|c| c.get_connection()).expect("connect");
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
        assert_eq!(secs * 1000 + micros / 1000, ms, "the server's clock does not read the time set");
    }

    /// A store on this setup's clock, under a prefix of its own.
    pub async fn store(&self, test: &str) -> RedisStore {
        match &self.clock {
            Clock::Client(clock) => super::client_clock_store(&self.server, test, clock.clone()).await,
            Clock::Server(_) => super::server_clock_store(&self.server, test).await,
        }
    }
}

/// Runs `cases` cases of `strategy` against `test`, keeping failures in
/// `regressions`, then checks that every key the cases left has a TTL.
pub fn run<S: Strategy>(
    setup: &Setup,
    cases: u32,
    regressions: &'static str,
    strategy: &S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..ProptestConfig::default()
    };
    let result = TestRunner::new(config).run(strategy, test);
    runtime().block_on(super::assert_every_key_has_ttl(&setup.server));
    if let Err(e) = result {
        panic!("{e}");
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}
