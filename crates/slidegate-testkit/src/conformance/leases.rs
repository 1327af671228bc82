//! Concurrency leases ([`Store::acquire`], `release`, `renew`): at most N
//! held at once per identity, given back when released or when their ttl
//! passes without a renewal — the same in every store.

use std::time::Duration;

use slidegate::store::{LeaseRequest, Store};
use slidegate::{ConcurrencyLimit, LeaseId, ManualClock};

fn ids(n: usize) -> Vec<LeaseId> {
    (0..n).map(|_| LeaseId::random().expect("randomness")).collect()
}

/// Up to the limit, then refused until one is given back; a release, a
/// renewal and the ttl, exactly.
pub async fn at_most_n_at_once<S: Store>(store: &S, clock: &ManualClock) {
    let limit = ConcurrencyLimit::new("exports", 3, Duration::from_secs(10)).expect("limit");
    let ids = ids(5);
    let lease = |i: usize, key: &'static str| LeaseRequest::new(&limit, key, &ids[i]).expect("lease");
    for i in 0..3 {
        let taken = store.acquire(&lease(i, "alice")).await.expect("acquire");
        assert_eq!((taken.allowed, taken.limit, taken.remaining), (true, 3, 2 - i as u32), "lease {i}");
    }
    let again = store.acquire(&lease(1, "alice")).await.expect("acquire");
    assert_eq!((again.allowed, again.remaining), (true, 0), "the same lease twice is one lease");
    clock.advance(Duration::from_secs(4));
    let refused = store.acquire(&lease(3, "alice")).await.expect("acquire");
    assert_eq!((refused.allowed, refused.remaining), (false, 0));
    assert_eq!(refused.retry_after, Duration::from_secs(6), "until the oldest lease's ttl passes");
    assert!(store.acquire(&lease(3, "bob")).await.expect("acquire").allowed, "bob has his own");

    assert!(store.release(&lease(0, "alice")).await.expect("release"));
    assert!(!store.release(&lease(0, "alice")).await.expect("release"), "released once");
    assert!(!store.release(&lease(4, "alice")).await.expect("release"), "an id never taken");
    assert!(store.acquire(&lease(3, "alice")).await.expect("acquire").allowed, "a released lease's place");
    assert!(!store.acquire(&lease(4, "alice")).await.expect("acquire").allowed);

    // Lease 2 (taken at 0) renewed at 4 s holds until 14 s; lease 1 was
    // renewed at 0 by its second take, lease 3 taken at 4 s.
    assert!(store.renew(&lease(2, "alice")).await.expect("renew"));
    clock.advance(Duration::from_secs(6));
    let after = store.acquire(&lease(4, "alice")).await.expect("acquire");
    assert_eq!((after.allowed, after.remaining), (true, 0), "lease 1's ttl passed at 10 s: its place");
    assert!(!store.renew(&lease(1, "alice")).await.expect("renew"), "an expired lease is not renewed");
    clock.advance(Duration::from_secs(10));
    let all_gone = store.acquire(&lease(0, "alice")).await.expect("acquire");
    assert_eq!(
        (all_gone.allowed, all_gone.remaining),
        (true, 2),
        "every ttl has passed: only this one is held"
    );
    clock.advance(Duration::from_secs(30));
}
