//! One request's needs at once — concurrency leases, reservations and rate
//! slots — all or nothing: [`Limiter::admit`].

use std::fmt;
use std::time::Duration;

use super::Limiter;
use super::leases::Lease;
use super::reservations::Reservation;
use crate::{ConcurrencyLimit, Decision, Error, MultiDecision, Rule, Store, WeightedDimension};

/// What one request needs at once (see [`Limiter::admit`]): a lease of
/// each concurrency limit, a reservation of each estimate, and a slot of
/// each rate rule.
#[derive(Debug, Clone, Default)]
pub struct Needs<'a> {
    leases: Vec<(&'a ConcurrencyLimit, &'a str)>,
    reservations: Vec<(&'a Rule, &'a str, u32, Duration)>,
    checks: Vec<WeightedDimension<'a>>,
}

impl<'a> Needs<'a> {
    /// Nothing yet.
    pub fn new() -> Needs<'a> {
        Needs::default()
    }

    /// A lease of `limit` for `key`.
    #[must_use]
    pub fn lease(mut self, limit: &'a ConcurrencyLimit, key: &'a str) -> Needs<'a> {
        self.leases.push((limit, key));
        self
    }

    /// A reservation of `estimate` of `rule` for `key`, held for `ttl`
    /// (see [`Limiter::reserve`]).
    #[must_use]
    pub fn reserve(mut self, rule: &'a Rule, key: &'a str, estimate: u32, ttl: Duration) -> Needs<'a> {
        self.reservations.push((rule, key, estimate, ttl));
        self
    }

    /// `cost` of `rule` for `key`, charged as
    /// [`check_all_weighted`](Limiter::check_all_weighted) charges it
    /// (the needs' checks are one multi-dimension check).
    #[must_use]
    pub fn check(mut self, rule: &'a Rule, key: &'a str, cost: u32) -> Needs<'a> {
        self.checks.push((rule, key, cost));
        self
    }
}

/// Which of a [`Needs`] refused, by its place among its kind (in the
/// order they were added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The `n`-th lease.
    Lease(usize),
    /// The `n`-th reservation.
    Reservation(usize),
    /// The `n`-th check.
    Check(usize),
}

/// The answer to [`Limiter::admit`]: everything held, or nothing.
pub struct Admission<S: Store> {
    /// The leases, in the order asked (empty when refused).
    pub leases: Vec<Lease<S>>,
    /// The reservations, in the order asked (empty when refused).
    pub reservations: Vec<Reservation<S>>,
    /// The checks' decisions (`None` when none were asked for, or
    /// something before them refused).
    pub checks: Option<MultiDecision>,
    refused: Option<(Need, Decision)>,
}

impl<S: Store> fmt::Debug for Admission<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("leases", &self.leases)
            .field("reservations", &self.reservations)
            .field("checks", &self.checks)
            .field("refused", &self.refused)
            .finish()
    }
}

impl<S: Store> Admission<S> {
    /// Whether every need was admitted (and is held, or charged).
    pub fn is_admitted(&self) -> bool {
        self.refused.is_none()
    }

    /// The need that refused, and its decision (its `retry_after` says
    /// when to try again).
    pub fn refused_by(&self) -> Option<(Need, &Decision)> {
        self.refused.as_ref().map(|(need, decision)| (*need, decision))
    }

    /// How long until the refusing need could admit (zero when admitted).
    pub fn retry_after(&self) -> Duration {
        self.refused.as_ref().map_or(Duration::ZERO, |(_, decision)| decision.retry_after)
    }
}

/// What an admission took on the way: given back if it does not finish
/// (a refusal after them, an error, or its future dropped).
struct Taken<S: Store> {
    leases: Vec<Lease<S>>,
    reservations: Vec<Reservation<S>>,
}

impl<S: Store> Taken<S> {
    /// Gives everything back now, waiting for the store.
    async fn give_back(&mut self) {
        // One at a time: what is left stays here for `Drop` if this
        // future is dropped mid-way.
        while let Some(lease) = self.leases.pop() {
            if let Err(error) = lease.release().await {
                tracing::warn!(target: "slidegate", %error, "a lease taken for a refused request could not be given back; it comes back when its ttl passes");
            }
        }
        while let Some(reservation) = self.reservations.pop() {
            if let Err(error) = reservation.cancel().await {
                tracing::warn!(target: "slidegate", %error, "a reservation made for a refused request could not be cancelled; it stays charged at its estimate until its ttl passes");
            }
        }
    }
}

/// Dropped unfinished: the leases go back by their own drop, the
/// reservations are cancelled in a task.
impl<S: Store> Drop for Taken<S> {
    fn drop(&mut self) {
        if self.reservations.iter().all(|r| !r.is_held()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(target: "slidegate", "reservations of an unfinished admission dropped outside a Tokio runtime stay charged until their ttl passes");
            return;
        };
        let mut taken = Taken { leases: Vec::new(), reservations: std::mem::take(&mut self.reservations) };
        runtime.spawn(async move { taken.give_back().await });
    }
}

impl<S: Store> Limiter<S> {
    /// Admits a request that needs several things at once — concurrency
    /// leases, reservations and rate slots — all or nothing: the leases
    /// are taken first, then the reservations made, then the checks asked
    /// as one multi-dimension check. When one refuses, what was taken
    /// before it is given back (leases released, reservations cancelled,
    /// waited for) before the answer, and the checks are not charged.
    ///
    /// It never over-admits: each step is exact under concurrency on its
    /// own. While a request that ends refused holds its first needs (a
    /// round trip or two), a concurrent one may see less room than there
    /// will be — erring on the side of the limits. A future dropped
    /// mid-way gives back what it took in a task.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use std::time::Duration;
    /// use slidegate::{ConcurrencyLimit, Limiter, Need, Needs, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let streams = ConcurrencyLimit::new("streams", 2, Duration::from_secs(60))?;
    /// let tokens = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("tokens")?;
    /// let requests = Rule::per_second(NonZeroU32::new(5).unwrap()).named("requests")?;
    /// let limiter = Limiter::in_memory();
    /// let needs = |estimate| {
    ///     Needs::new()
    ///         .lease(&streams, "acme")
    ///         .reserve(&tokens, "acme", estimate, Duration::from_secs(30))
    ///         .check(&requests, "acme", 1)
    /// };
    /// let first = limiter.admit(&needs(600)).await?;
    /// assert!(first.is_admitted());
    /// // 600 more tokens do not fit: the second's lease is given back.
    /// let second = limiter.admit(&needs(600)).await?;
    /// assert_eq!(second.refused_by().map(|(need, _)| need), Some(Need::Reservation(0)));
    /// let Some(reservation) = first.reservations.into_iter().next() else { unreachable!() };
    /// reservation.commit(350).await?;
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Self::acquire), [`reserve`](Self::reserve)
    /// and [`check_all_weighted`](Self::check_all_weighted); what was taken
    /// before the error is given back.
    pub async fn admit(&self, needs: &Needs<'_>) -> Result<Admission<S>, Error> {
        let mut taken = Taken {
            leases: Vec::with_capacity(needs.leases.len()),
            reservations: Vec::with_capacity(needs.reservations.len()),
        };
        match self.take_all(needs, &mut taken).await {
            Ok(Taking::Done(checks)) => {
                let leases = std::mem::take(&mut taken.leases);
                let reservations = std::mem::take(&mut taken.reservations);
                Ok(Admission { leases, reservations, checks, refused: None })
            }
            Ok(Taking::Refused(need, decision, checks)) => {
                taken.give_back().await;
                Ok(Admission {
                    leases: Vec::new(),
                    reservations: Vec::new(),
                    checks,
                    refused: Some((need, decision)),
                })
            }
            Err(error) => {
                taken.give_back().await;
                Err(error)
            }
        }
    }

    /// Takes `needs` in order into `taken`, up to the first refusal.
    async fn take_all(&self, needs: &Needs<'_>, taken: &mut Taken<S>) -> Result<Taking, Error> {
        for (i, &(limit, key)) in needs.leases.iter().enumerate() {
            let lease = self.acquire(limit, key).await?;
            if !lease.is_admitted() {
                return Ok(Taking::Refused(Need::Lease(i), *lease.decision(), None));
            }
            taken.leases.push(lease);
        }
        for (i, &(rule, key, estimate, ttl)) in needs.reservations.iter().enumerate() {
            let reservation = self.reserve(rule, key, estimate, ttl).await?;
            if !reservation.is_admitted() {
                return Ok(Taking::Refused(Need::Reservation(i), *reservation.decision(), None));
            }
            taken.reservations.push(reservation);
        }
        if needs.checks.is_empty() {
            return Ok(Taking::Done(None));
        }
        let checks = self.check_all_weighted(&needs.checks).await?;
        Ok(match checks.denied_by() {
            Some(i) => Taking::Refused(Need::Check(i), checks.decisions[i], Some(checks)),
            None => Taking::Done(Some(checks)),
        })
    }
}

/// How taking a request's needs ended (when no store call failed).
enum Taking {
    /// All taken; the checks' decisions.
    Done(Option<MultiDecision>),
    /// This need refused with this decision (and the checks' decisions,
    /// when a check refused).
    Refused(Need, Decision, Option<MultiDecision>),
}
