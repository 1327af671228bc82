//! For store implementers: the [`Store`] trait and the validated requests
//! that cross it.
//!
//! The [`Limiter`](crate::Limiter) validates every request once, where it
//! enters the core — the key encoded into an [`Identity`], the cost checked
//! against the rule, a multi-dimension request's [`Dimensions`] checked for
//! count and repeats — and hands stores only requests built that way. A
//! store trusts them: it never re-validates or re-encodes.

mod request;

use std::future::Future;

pub use crate::clock::validate_time;
pub use crate::concurrency::LeaseRequest;
pub use crate::identity::{Identity, encode_identity, validate_cost};
pub use crate::penalty::PenaltyState;
pub use crate::reservation::ReservationRequest;
pub use request::{Dimensions, Request};

use crate::{Decision, Error, ErrorKind, MultiDecision};

/// Where limiter state lives: [`MemoryStore`](crate::MemoryStore) in this
/// crate, Redis in `slidegate-redis`.
///
/// A store decides and records atomically: two concurrent checks of the same
/// key never both take the last unit. Its input is already validated (see
/// the [module](self) docs).
pub trait Store: Send + Sync + 'static {
    /// Decides `request`, charging it if admitted.
    ///
    /// # Errors
    ///
    /// A store failure, or a time the store cannot decide at
    /// ([`InvalidTime`](crate::ErrorKind::InvalidTime)). Being over the
    /// limit is `Ok` with a denied [`Decision`].
    fn check(&self, request: &Request<'_>) -> impl Future<Output = Result<Decision, Error>> + Send;

    /// Decides one request against several dimensions at once, atomically:
    /// admitted only if every dimension admits, and then all are charged;
    /// if any denies, none is (see [`MultiDecision`]).
    ///
    /// The default decides one dimension with [`check`](Self::check) and
    /// refuses more with [`ErrorKind::Backend`]: a store must decide
    /// several atomically, which only the store itself can do. Both stores
    /// of slidegate implement it.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    fn check_all(
        &self,
        dimensions: &Dimensions<'_>,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        async move {
            match dimensions.requests() {
                [one] => Ok(MultiDecision::from_decisions(vec![self.check(one).await?])),
                _ => Err(Error::new(
                    ErrorKind::Backend,
                    "this store does not implement multi-dimension checks",
                )),
            }
        }
    }

    /// What [`check_all`](Self::check_all) would answer now, charging
    /// nothing and counting no penalty violation: each dimension's verdict
    /// for its cost, with what it admits now as `remaining` (a rate-limit
    /// service's check-only requests and `/v1/peek`).
    ///
    /// The default refuses with [`ErrorKind::Backend`]; both stores of
    /// slidegate implement it.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    fn peek_all(
        &self,
        dimensions: &Dimensions<'_>,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        let _ = dimensions;
        async { Err(Error::new(ErrorKind::Backend, "this store cannot answer without charging (peek)")) }
    }

    /// Forgets everything `request`'s rule keeps for its identity — the
    /// charges, and a penalty's violations and ban — as if it had never
    /// been seen (an operator's reset). Returns whether anything was kept.
    /// The request's cost is not used.
    ///
    /// The default refuses with [`ErrorKind::Backend`]; both stores of
    /// slidegate implement it.
    ///
    /// # Errors
    ///
    /// A store failure.
    fn reset(&self, request: &Request<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        let _ = request;
        async { Err(Error::new(ErrorKind::Backend, "this store cannot reset a key's state")) }
    }

    /// Takes the lease `lease.id()` of its identity when fewer than its
    /// limit are held, at the store's time: leases whose ttl has passed are
    /// dropped first, and one already held is renewed (taking the same
    /// lease twice holds one). The decision: `allowed`, `limit`,
    /// `remaining` (the limit less the leases held after), for a refusal
    /// `retry_after` and `reset_after` (until the oldest and the newest
    /// lease's ttl passes).
    ///
    /// The default refuses with [`ErrorKind::Backend`]; both stores of
    /// slidegate implement it.
    ///
    /// # Errors
    ///
    /// A store failure.
    fn acquire(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<Decision, Error>> + Send {
        let _ = lease;
        async { Err(Error::new(ErrorKind::Backend, "this store holds no concurrency leases")) }
    }

    /// Gives back a lease; whether it was held (and its ttl had not passed).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn release(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        let _ = lease;
        async { Err(Error::new(ErrorKind::Backend, "this store holds no concurrency leases")) }
    }

    /// Holds a lease for another ttl from now; whether it was still held.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn renew(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        let _ = lease;
        async { Err(Error::new(ErrorKind::Backend, "this store holds no concurrency leases")) }
    }

    /// Reserves `estimate` (1 to the limit) of `reservation`'s rule for
    /// `ttl_ms`: admitted only if the whole estimate fits (also under a
    /// budget), and then charged as a check charges it, at the store's
    /// time, and the reservation kept until it is settled or its ttl
    /// passes (the charge then stays: committed at the estimate). The
    /// decision is a check's.
    ///
    /// The default refuses with [`ErrorKind::Backend`]; both stores of
    /// slidegate implement it.
    ///
    /// # Errors
    ///
    /// A store failure.
    fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        let _ = (reservation, estimate, ttl_ms);
        async { Err(Error::new(ErrorKind::Backend, "this store holds no reservations")) }
    }

    /// Settles a reservation at `actual` (0 cancels it): what its estimate
    /// charged beyond `actual` is given back, what `actual` asks beyond
    /// the estimate is recorded now whatever remains (see
    /// [`State::settle`](crate::algorithm::State::settle)), and the
    /// reservation is gone. `None` when it is not held (settled already,
    /// its ttl passed, or never made); otherwise the state after, as a
    /// charge reports it (with its debt).
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> impl Future<Output = Result<Option<Decision>, Error>> + Send {
        let _ = (reservation, actual);
        async { Err(Error::new(ErrorKind::Backend, "this store holds no reservations")) }
    }

    /// Decides many independent requests; the results are in input order,
    /// one per request. The default asks one at a time; the Redis store
    /// sends the whole batch in one round trip (per Cluster slot).
    fn check_batch(
        &self,
        requests: &[Request<'_>],
    ) -> impl Future<Output = Vec<Result<Decision, Error>>> + Send {
        async move {
            let mut out = Vec::with_capacity(requests.len());
            for request in requests {
                out.push(self.check(request).await);
            }
            out
        }
    }

    /// Whether this store answers from process memory without I/O. The
    /// [`Limiter`](crate::Limiter) calls a local store directly; a remote one
    /// (the default) gets the deadline, circuit breaker and deny cache.
    fn is_local(&self) -> bool {
        false
    }

    /// Whether a denial can be undone by the store itself, not only by
    /// time: a store that reserves charges and releases them (a Redis
    /// Cluster's multi-dimension checks across slots) may deny a request
    /// because of a reservation released a moment later. The limiter's
    /// deny cache, which is exact only if nothing but time frees capacity,
    /// does not keep such a store's denials (bans apart). Default `false`.
    fn releases_charges(&self) -> bool {
        false
    }
}

impl<S: Store> Store for std::sync::Arc<S> {
    fn acquire(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<Decision, Error>> + Send {
        (**self).acquire(lease)
    }

    fn release(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        (**self).release(lease)
    }

    fn renew(&self, lease: &LeaseRequest<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        (**self).renew(lease)
    }

    fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        (**self).reserve(reservation, estimate, ttl_ms)
    }

    fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> impl Future<Output = Result<Option<Decision>, Error>> + Send {
        (**self).settle(reservation, actual)
    }

    fn reset(&self, request: &Request<'_>) -> impl Future<Output = Result<bool, Error>> + Send {
        (**self).reset(request)
    }

    fn peek_all(
        &self,
        dimensions: &Dimensions<'_>,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        (**self).peek_all(dimensions)
    }

    fn check(&self, request: &Request<'_>) -> impl Future<Output = Result<Decision, Error>> + Send {
        (**self).check(request)
    }

    fn check_all(
        &self,
        dimensions: &Dimensions<'_>,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        (**self).check_all(dimensions)
    }

    fn check_batch(
        &self,
        requests: &[Request<'_>],
    ) -> impl Future<Output = Vec<Result<Decision, Error>>> + Send {
        (**self).check_batch(requests)
    }

    fn is_local(&self) -> bool {
        (**self).is_local()
    }

    fn releases_charges(&self) -> bool {
        (**self).releases_charges()
    }
}
