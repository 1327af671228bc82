//! Run with: cargo run -p example-rate-limit-attribute
//!
//! A service whose methods are guarded by `#[rate_limit]`, on the embedded
//! memory store. Time is a `ManualClock` moved by hand, so the run shows a
//! window sliding without waiting for it.

mod service;

use std::time::Duration;

use slidegate::{Limiter, ManualClock, MemoryStore};

use service::{Accounts, ServiceError};

fn describe<T: std::fmt::Debug>(result: &Result<T, ServiceError>) -> String {
    match result {
        Ok(value) => format!("ok: {value:?}"),
        Err(ServiceError::Limited(limited)) => match limited.decision() {
            Some(denial) => format!(
                "denied: {} (retry after {:?}, {} left)",
                limited.message().unwrap_or("over the limit"),
                denial.retry_after,
                denial.remaining
            ),
            None => format!("limiter error: {limited}"),
        },
        Err(error) => format!("error: {error}"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let clock = ManualClock::new(0);
    let accounts = Accounts::new(Limiter::new(MemoryStore::builder().clock(clock.clone()).build()));

    println!("-- logins: 3 attempts per user per 10 s");
    for (second, password) in [(0, "guess"), (2, "guess"), (4, "hunter2"), (5, "hunter2")] {
        clock.set(second * 1000);
        let result = accounts.login("alice", password).await;
        println!("t={second}s alice/{password}: {}", describe(&result));
    }
    println!("t=5s bob: {}", describe(&accounts.login("bob", "hunter2").await));
    clock.advance(Duration::from_secs(5));
    println!(
        "t=10s alice (first attempt left the window): {}",
        describe(&accounts.login("alice", "hunter2").await)
    );

    println!("-- exports: 100 rows per user per minute, cost = rows");
    for rows in [60, 30, 20, 10] {
        println!("alice exports {rows} rows: {}", describe(&accounts.export("alice", rows).await));
    }
    println!("an empty user name: {}", describe(&accounts.export("", 1).await));
}
