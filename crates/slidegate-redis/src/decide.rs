//! The [`Store`] implementation of [`RedisStore`]: the script is picked by
//! the request, whichever entry point it came through (docs/design.md,
//! "Scripts").

use slidegate::store::{Dimensions, LeaseRequest, Request, ReservationRequest, Store};
use slidegate::{Decision, Error, MultiDecision};

use crate::calls::holds::{Hold, LeaseOp, ReservationOp};
use crate::calls::single::Check;
use crate::calls::{Ints, general, lease, reserve, single};
use crate::cross_slot;
use crate::store::RedisStore;

/// The script is picked by the request, whichever entry point it came
/// through (docs/design.md §4, "Scripts"): one dimension without a
/// penalty is its algorithm's fast single script, auto-batched when calls
/// are in flight; penalties and several dimensions are the general script.
impl Store for RedisStore {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        let rule = request.rule();
        if rule.penalty().is_some() {
            let call = general::call(
                self.scripts(),
                self.prefix(),
                &[request],
                self.now()?,
                self.uses_field_ttl(),
                general::Mode::Check,
            );
            return general::decode_one(rule, &self.send(&call).await?);
        }
        let check = Check::new(self.prefix(), request);
        let connected = self.connected()?;
        let reply = match &connected.auto_batch {
            Some(batch) => batch.run(check).await?,
            None => {
                connected.backend.run(&check.call(self.scripts(), self.now()?, connected.field_ttl)).await?
            }
        };
        single::decode(rule, &reply)
    }

    /// One script call for all dimensions when their keys share a slot
    /// (always on a standalone server); otherwise one reservation per slot,
    /// released if any slot denies (see `cross_slot`).
    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        let requests = dimensions.requests();
        if let [one] = requests {
            return Ok(MultiDecision::from_decisions(vec![self.check(one).await?]));
        }
        if self.is_cluster() {
            let groups = cross_slot::group_by_slot(requests);
            if groups.len() > 1 {
                return cross_slot::check_all(self, dimensions, &groups).await;
            }
        }
        let all: Vec<&Request<'_>> = requests.iter().collect();
        let call = general::call(
            self.scripts(),
            self.prefix(),
            &all,
            self.now()?,
            self.uses_field_ttl(),
            general::Mode::Check,
        );
        let rules: Vec<_> = requests.iter().map(Request::rule).collect();
        Ok(MultiDecision::from_decisions(general::decode(&rules, &self.send(&call).await?)?.decisions))
    }

    /// The general script in peek mode: nothing charged, no violation
    /// counted; in a Cluster one call per slot, concurrently (there is
    /// nothing to release).
    async fn peek_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        let requests = dimensions.requests();
        let groups = if self.is_cluster() {
            cross_slot::group_by_slot(requests)
        } else {
            vec![(0..requests.len()).collect()]
        };
        let now = self.now()?;
        let calls: Vec<_> = groups
            .iter()
            .map(|group| {
                let part: Vec<&Request<'_>> = group.iter().map(|&i| &requests[i]).collect();
                general::call(
                    self.scripts(),
                    self.prefix(),
                    &part,
                    now,
                    self.uses_field_ttl(),
                    general::Mode::Peek,
                )
            })
            .collect();
        let replies = futures_util::future::join_all(calls.iter().map(|call| self.send(call))).await;
        let mut decisions = vec![None; requests.len()];
        for (group, reply) in groups.iter().zip(replies) {
            let rules: Vec<_> = group.iter().map(|&i| requests[i].rule()).collect();
            for (&i, decision) in group.iter().zip(general::decode(&rules, &reply?)?.decisions) {
                decisions[i] = Some(decision);
            }
        }
        Ok(MultiDecision::from_decisions(decisions.into_iter().flatten().collect()))
    }

    /// `entry/reset.lua`: the state, violation and ban keys, deleted in
    /// one call (they share the identity's slot).
    async fn reset(&self, request: &Request<'_>) -> Result<bool, Error> {
        let keys = crate::keys::keys_of(self.prefix(), request.rule(), request.identity().as_str());
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let call = crate::calls::Call::new(self.scripts().reset(), &key_refs);
        let reply = self.send(&call).await?;
        Ok(reply.first().is_some_and(|&n| n > 0))
    }

    async fn acquire(&self, lease: &LeaseRequest<'_>) -> Result<Decision, Error> {
        let reply = self.hold(Hold::lease(self.prefix(), lease, LeaseOp::Acquire)).await?;
        lease::decode_acquire(lease.limit().limit(), &reply)
    }

    async fn release(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        lease::decode_held(&self.hold(Hold::lease(self.prefix(), lease, LeaseOp::Release)).await?)
    }

    async fn renew(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        lease::decode_held(&self.hold(Hold::lease(self.prefix(), lease, LeaseOp::Renew)).await?)
    }

    async fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        let op = ReservationOp::Reserve { estimate, ttl_ms };
        let reply = self.hold(Hold::reservation(self.prefix(), reservation, op)).await?;
        reserve::decode_reserve(reservation.rule(), &reply)
    }

    async fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        let op = ReservationOp::Settle { actual };
        let reply = self.hold(Hold::reservation(self.prefix(), reservation, op)).await?;
        reserve::decode_settle(reservation.rule(), &reply)
    }

    async fn check_batch(&self, requests: &[Request<'_>]) -> Vec<Result<Decision, Error>> {
        crate::batch::check_batch(self, requests).await
    }

    /// A Cluster reserves the slots of a multi-dimension check across slots
    /// and releases them when one denies (see [`check_all`](Self::check_all)).
    fn releases_charges(&self) -> bool {
        self.is_cluster()
    }
}

impl RedisStore {
    /// A lease or reservation op, auto-batched when that applies (one
    /// server on its own clock), else as its own script's call.
    async fn hold(&self, hold: Hold) -> Result<Ints, Error> {
        let connected = self.connected()?;
        match &connected.holds {
            Some(batch) => batch.run(hold).await,
            None => connected.backend.run(&hold.call(self.scripts(), self.now()?, connected.field_ttl)).await,
        }
    }
}
