//! Auto-batching: when the server is busy, single checks go to it
//! together, as one call of the multi script (scripts/entry/multi.lua) —
//! and lease and reservation ops, in their own queue, as one call of
//! scripts/entry/holds.lua. What follows says checks; ops go alike.
//!
//! While fewer than [`AUTO_BATCH_DIRECT`] checks are out, a caller sends
//! its check itself, as its own single-script call — exactly the unbatched
//! path, so a lightly loaded service sees no difference. Past that, checks
//! queue for a driver task, which keeps up to [`AUTO_BATCH_IN_FLIGHT`]
//! calls out; each takes what is queued (up to `max` checks) as one
//! multi-script call, after letting the callers that are ready to run
//! queue theirs when all its calls are out. Redis then pays for one
//! command, one `TIME` and one reply per batch instead of per check.
//!
//! Nothing waits for a batch to fill, and a queued check whose caller gave
//! up (its deadline passed) before it was sent is dropped, never charged.
//! Only for one server on the server's clock (standalone or Sentinel): a
//! Cluster's keys span slots, and a client clock's time is the caller's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis::Value;
use slidegate::{Error, ErrorKind};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::calls::holds::{self, Hold};
use crate::calls::single::Check;
use crate::calls::{Call, Ints, multi};
use crate::connection::Backend;
use crate::now::Now;
use crate::scripts::Scripts;

/// Calls the driver of one store has out at once (batches, or a lone
/// queued check); checks queued meanwhile wait for the next call.
pub const AUTO_BATCH_IN_FLIGHT: usize = 4;
/// Checks one store lets its callers send on their own, at once; checks
/// made while that many are out queue for the driver's batches.
pub const AUTO_BATCH_DIRECT: usize = 8;
/// Checks queued beyond this are refused (the server is not keeping up;
/// the limiter's failure policy answers them).
const QUEUE: usize = 65_536;

/// What is batched: single checks (`entry/multi.lua`), or lease and
/// reservation ops (`entry/holds.lua`) — each alone as its own script's
/// call, or many as one call answering each one's reply in order.
pub(crate) trait Batched: Send + Sync + 'static {
    /// The call of one on its own.
    fn one<'s>(&self, scripts: &'s Scripts, field_ttl: bool) -> Call<'s>;
    /// The call of many at once.
    fn many<'s>(items: &[&Self], scripts: &'s Scripts, field_ttl: bool) -> Call<'s>;
}

impl Batched for Check {
    fn one<'s>(&self, scripts: &'s Scripts, field_ttl: bool) -> Call<'s> {
        self.call(scripts, Now::Server, field_ttl)
    }

    fn many<'s>(items: &[&Check], scripts: &'s Scripts, field_ttl: bool) -> Call<'s> {
        multi::call(scripts, items, Now::Server, field_ttl)
    }
}

impl Batched for Hold {
    fn one<'s>(&self, scripts: &'s Scripts, field_ttl: bool) -> Call<'s> {
        self.call(scripts, Now::Server, field_ttl)
    }

    fn many<'s>(items: &[&Hold], scripts: &'s Scripts, field_ttl: bool) -> Call<'s> {
        holds::call_many(scripts, items, Now::Server, field_ttl)
    }
}

struct Job<T> {
    item: T,
    reply: oneshot::Sender<Result<Ints, Error>>,
}

/// The queue of the driver task, and how many items callers have out on
/// their own.
#[derive(Debug)]
pub(crate) struct AutoBatch<T> {
    jobs: mpsc::Sender<Job<T>>,
    /// Checks out on their own, sent by their callers.
    direct: AtomicUsize,
    sender: Sender,
}

impl<T: Batched> AutoBatch<T> {
    /// Starts the driver on the current tokio runtime; it ends when the
    /// last store clone is dropped.
    pub(crate) fn start(
        backend: Arc<Backend>,
        scripts: Arc<Scripts>,
        field_ttl: bool,
        max: usize,
    ) -> AutoBatch<T> {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let sender = Sender { backend, scripts, field_ttl };
        tokio::spawn(drive(queue, sender.clone(), max.max(1)));
        AutoBatch { jobs, direct: AtomicUsize::new(0), sender }
    }

    /// Sends `item` in the next call to the server; the reply is its own
    /// script's.
    pub(crate) async fn run(&self, item: T) -> Result<Ints, Error> {
        // While fewer than AUTO_BATCH_DIRECT checks are out on their own
        // and none is queued, the check goes at once, from the caller's
        // own task: a lightly loaded service pays nothing for batching.
        // Past that the server is busy, and checks queue for the driver.
        if self.jobs.capacity() == QUEUE
            && let Some(_direct) = Direct::enter(&self.direct)
        {
            return self.sender.send_one(&item).await;
        }
        let (reply, answer) = oneshot::channel();
        self.jobs.try_send(Job { item, reply }).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => {
                Error::new(ErrorKind::Unavailable, format!("{QUEUE} calls already wait for the Redis server"))
            }
            mpsc::error::TrySendError::Closed(_) => stopped(),
        })?;
        answer.await.map_err(|_| stopped())?
    }
}

/// A place among the [`AUTO_BATCH_DIRECT`] checks out on their own; given
/// back when dropped, also when the caller stops waiting.
struct Direct<'a>(&'a AtomicUsize);

impl<'a> Direct<'a> {
    /// A place, unless all are taken.
    fn enter(count: &'a AtomicUsize) -> Option<Direct<'a>> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < AUTO_BATCH_DIRECT).then_some(n + 1))
            .ok()
            .map(|_| Direct(count))
    }
}

impl Drop for Direct<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn stopped() -> Error {
    Error::new(ErrorKind::Unavailable, "the store's auto-batching task has stopped (its runtime shut down)")
}

/// What a batch needs to be sent.
#[derive(Clone)]
struct Sender {
    backend: Arc<Backend>,
    scripts: Arc<Scripts>,
    field_ttl: bool,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("field_ttl", &self.field_ttl).finish_non_exhaustive()
    }
}

async fn drive<T: Batched>(mut queue: mpsc::Receiver<Job<T>>, sender: Sender, max: usize) {
    let in_flight = Arc::new(Semaphore::new(AUTO_BATCH_IN_FLIGHT));
    loop {
        let Some(first) = queue.recv().await else { return };
        // Never closed: acquiring only waits for a call to come back.
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else { return };
        if in_flight.available_permits() == 0 {
            // Every other call slot is out too, so the server is busy
            // anyway: let the callers that are ready to run queue their
            // checks as well, for one bigger call.
            tokio::task::yield_now().await;
        }
        let mut jobs = vec![first];
        while jobs.len() < max {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let sender = sender.clone();
        tokio::spawn(async move {
            sender.send(jobs).await;
            drop(permit);
        });
    }
}

impl Sender {
    /// One item as its own script's call.
    async fn send_one<T: Batched>(&self, item: &T) -> Result<Ints, Error> {
        self.backend.run(&item.one(&self.scripts, self.field_ttl)).await
    }

    async fn send<T: Batched>(&self, mut jobs: Vec<Job<T>>) {
        // A caller that gave up is not charged.
        jobs.retain(|job| !job.reply.is_closed());
        if jobs.len() <= 1 {
            if let Some(job) = jobs.pop() {
                let reply = self.send_one(&job.item).await;
                // The caller may have gone meanwhile; nothing to tell.
                let _ = job.reply.send(reply);
            }
            return;
        }
        let items: Vec<&T> = jobs.iter().map(|job| &job.item).collect();
        let call = T::many(&items, &self.scripts, self.field_ttl);
        let replies = match self.backend.run::<Value>(&call).await {
            Ok(reply) => multi::decode(reply, jobs.len()),
            Err(error) => jobs.iter().map(|_| Err(Error::new(error.kind(), error.message()))).collect(),
        };
        for (job, reply) in jobs.into_iter().zip(replies) {
            let _ = job.reply.send(reply);
        }
    }
}
