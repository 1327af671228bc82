//! One request's needs at once ([`Limiter::admit`]): a lease, a
//! reservation and rate slots, all or nothing — whichever refuses, what
//! was taken before it is given back and nothing after it is asked. The
//! same in every store.

use std::num::NonZeroU32;
use std::time::Duration;

use slidegate::{ConcurrencyLimit, Limiter, ManualClock, Need, Needs, Rule, Store};

/// A lease of 2, a budget reservation of the estimate against 1,000, and
/// one slot of 3 per minute: refusals by each leave the others as they
/// were; an admission holds all three until settled.
pub async fn all_or_nothing<S: Store>(store: S, clock: &ManualClock) {
    let limiter = Limiter::builder(store)
        .clock(clock.clone())
        .deadline(Duration::from_secs(10))
        .no_deny_cache()
        .build();
    let nz = |n| NonZeroU32::new(n).expect("non-zero");
    let streams = ConcurrencyLimit::new("streams", 2, Duration::from_secs(60)).expect("limit");
    let tokens = Rule::per_minute(nz(1000)).named("tokens").expect("rule").budget();
    let requests = Rule::per_minute(nz(3)).named("requests").expect("rule");
    let ttl = Duration::from_secs(30);
    let needs = |estimate| {
        Needs::new()
            .lease(&streams, "acme")
            .reserve(&tokens, "acme", estimate, ttl)
            .check(&requests, "acme", 1)
    };
    let state = async || {
        let lease = limiter.acquire(&streams, "acme").await.expect("acquire");
        let free = lease.decision().remaining + u32::from(lease.is_held());
        lease.release().await.expect("release");
        let peeked =
            limiter.peek_all_weighted(&[(&tokens, "acme", 1), (&requests, "acme", 1)]).await.expect("peek");
        (free, peeked.decisions[0].remaining, peeked.decisions[1].remaining)
    };
    assert_eq!(state().await, (2, 1000, 3));

    let first = limiter.admit(&needs(600)).await.expect("admit");
    assert!(first.is_admitted(), "{first:?}");
    assert_eq!((first.leases.len(), first.reservations.len()), (1, 1));
    assert_eq!(first.checks.as_ref().map(|c| c.decisions[0].remaining), Some(2));
    assert_eq!(state().await, (1, 400, 2));

    // The reservation does not fit: the lease taken for it goes back, the
    // slot is not asked.
    let refused = limiter.admit(&needs(600)).await.expect("admit");
    let (need, denial) = refused.refused_by().expect("refused");
    assert_eq!((need, denial.remaining), (Need::Reservation(0), 400));
    assert!(refused.leases.is_empty() && refused.reservations.is_empty() && refused.checks.is_none());
    assert_eq!(state().await, (1, 400, 2), "nothing kept");

    // Two more admitted: the second refused by its lease (two running),
    // holding nothing.
    let second = limiter.admit(&needs(100)).await.expect("admit");
    assert!(second.is_admitted());
    let third = limiter.admit(&needs(100)).await.expect("admit");
    assert_eq!(third.refused_by().map(|(need, _)| need), Some(Need::Lease(0)));
    assert_eq!(state().await, (0, 300, 1));

    // The slot refuses: the lease and the reservation taken go back.
    let Some(lease) = second.leases.into_iter().next() else { panic!("a lease") };
    lease.release().await.expect("release");
    assert!(limiter.check(&requests, "acme").await.expect("check").allowed, "the last slot");
    let by_slot = limiter.admit(&needs(50)).await.expect("admit");
    let (need, denial) = by_slot.refused_by().expect("refused");
    assert_eq!((need, denial.allowed), (Need::Check(0), false));
    assert!(by_slot.retry_after() > Duration::ZERO);
    assert_eq!(state().await, (1, 300, 0), "the lease and the 50 given back");

    // Settled: the first's 600 committed at 350.
    let Some(reservation) = first.reservations.into_iter().next() else { panic!("a reservation") };
    let after = reservation.commit(350).await.expect("commit").expect("held");
    assert_eq!(after.remaining, 550);
    for lease in first.leases {
        assert!(lease.release().await.expect("release"));
    }
    let Some(reservation) = second.reservations.into_iter().next() else { panic!("a reservation") };
    reservation.cancel().await.expect("cancel");
    assert_eq!(state().await, (2, 650, 0), "both leases back, 350 + 0 charged");
}
