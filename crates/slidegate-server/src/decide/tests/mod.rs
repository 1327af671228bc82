//! envoy ratelimit's README examples 1–11, verbatim, loaded by slidegate and
//! decided through `Decider::check` on the memory store under a manual
//! clock; then slidegate's own semantics: exact sliding windows, several
//! limits per descriptor, all-or-nothing requests, weights, check-only
//! descriptors, request overrides and directory loading.

use std::path::{Path, PathBuf};
use std::time::Duration;

use slidegate::{Limiter, ManualClock, MemoryStore};

use crate::ServiceStore;
use crate::config::{Config, ConfigErrors, Enforcement, Rules, Unit};
use crate::decide::Decider;
use crate::decide::request::{
    CheckAnswer, CheckRequest, Code, DescriptorStatus, LimitOverride, Mode, RequestDescriptor,
};

mod loading;
mod readme_1_to_5;
mod readme_6_to_8;
mod readme_9_to_11;
mod semantics;

// ---------------------------------------------------------------------------
// Harness.

struct Harness {
    clock: ManualClock,
    decider: Decider,
}

fn load(yaml: &str) -> Config {
    Config::from_texts(&[(PathBuf::from("example.yaml"), yaml.to_owned())])
        .unwrap_or_else(|e| panic!("the example does not load: {e}\n{yaml}"))
}

fn harness(yaml: &str) -> Harness {
    harness_of(load(yaml))
}

fn harness_of(config: Config) -> Harness {
    let clock = ManualClock::new(1_000_000);
    let store = ServiceStore::Memory(MemoryStore::builder().clock(clock.clone()).build());
    let limiter = Limiter::builder(store).clock(clock.clone()).build();
    Harness { clock, decider: Decider::new(limiter, Rules::new(config)) }
}

fn desc(entries: &[(&str, &str)]) -> RequestDescriptor {
    RequestDescriptor {
        entries: entries.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect(),
        hits_addend: None,
        limit: None,
    }
}

fn weighted(entries: &[(&str, &str)], hits: u64) -> RequestDescriptor {
    RequestDescriptor { hits_addend: Some(hits), ..desc(entries) }
}

impl Harness {
    async fn request(&self, domain: &str, descriptors: Vec<RequestDescriptor>) -> CheckAnswer {
        let request = CheckRequest { domain: domain.to_owned(), descriptors, hits_addend: 0 };
        self.decider.check(&request, Mode::Charge).await.expect("the request is answered")
    }

    /// One descriptor; the answer's code must be the descriptor's.
    async fn one(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        self.one_of(domain, desc(entries)).await
    }

    async fn one_of(&self, domain: &str, descriptor: RequestDescriptor) -> DescriptorStatus {
        let answer = self.request(domain, vec![descriptor]).await;
        assert_eq!(answer.statuses.len(), 1);
        let status = answer.statuses.into_iter().next().unwrap();
        assert_eq!(answer.code, status.code, "one descriptor: the request's code is its code");
        status
    }

    /// Exactly `n` requests for `entries` are admitted (remaining counting
    /// down to 0), then the next is over the limit.
    async fn admits_exactly(&self, domain: &str, entries: &[(&str, &str)], n: u32) {
        for i in 0..n {
            let status = self.one(domain, entries).await;
            assert_eq!(status.code, Code::Ok, "request {} of {n} for {entries:?}", i + 1);
            assert_eq!(status.remaining, n - 1 - i, "remaining after request {} for {entries:?}", i + 1);
        }
        let status = self.one(domain, entries).await;
        assert_eq!(status.code, Code::OverLimit, "request {} for {entries:?} is over {n}", n + 1);
        assert_eq!(status.remaining, 0);
        assert!(status.retry_after > Duration::ZERO);
    }

    /// What a check-only request (`hits_addend: 0`) sees, charging nothing.
    async fn peek(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        self.one_of(domain, weighted(entries, 0)).await
    }
}

/// The applying limit as `(requests_per_unit, unit)`.
fn limit_of(status: &DescriptorStatus) -> Option<(u32, Option<Unit>)> {
    status.limit.as_ref().map(|l| (l.requests_per_unit(), l.unit))
}

fn assert_no_limit(status: &DescriptorStatus) {
    assert_eq!(status.code, Code::Ok);
    assert!(status.limit.is_none(), "no limit should apply, got {:?}", status.limit);
    assert!(status.limits.is_empty());
    assert!(!status.shadow_over_limit);
}
