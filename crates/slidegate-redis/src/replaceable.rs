//! A connection in use that is replaced when it stops answering.
//!
//! redis-rs reconnects by itself when a connection breaks (reset, closed),
//! but not when it goes silent: a peer that stops answering without
//! closing (a half-dead NAT entry, a proxy that hangs) or that answers
//! what is not RESP (`$1000000000`, then nothing — the parser waits for a
//! gigabyte) leaves every call timing out on it for good, while a new
//! connection would work. So every call's outcome is counted here: a call
//! that times out, fails on the connection, or is abandoned unanswered
//! (the limiter's deadline dropped it) is *unanswered*; any answer —
//! errors included — shows the connection alive and ends the count. A
//! connection is replaced once [`STALLED_CALLS`] calls in a row went
//! unanswered over at least [`SILENCE`], or [`STALLED_BURST`] in a row
//! however fast; at most once per [`SILENCE`], in the background, keeping
//! the old one until the new one is up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use redis::RedisResult;
use tokio::time::Instant;

/// Unanswered calls in a row that, over [`SILENCE`], replace a connection.
pub(crate) const STALLED_CALLS: u32 = 3;

/// How long a connection must have answered nothing before it is replaced
/// (a busy server's pauses — a fork, a slow command — are shorter), and
/// the least time between two replacements.
pub(crate) const SILENCE: Duration = Duration::from_secs(1);

/// Unanswered calls in a row that replace a connection at once (a lane of
/// a Cluster pool stuck after a reshard, under load).
pub(crate) const STALLED_BURST: u32 = 32;

/// Opens a fresh connection.
pub(crate) type Reopen<C> =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = RedisResult<C>> + Send>> + Send + Sync>;

/// The connection in use, and how to replace it.
pub(crate) struct Replaceable<C> {
    /// The connection, and its generation (bumped by each replacement):
    /// read by every call, without a lock.
    current: ArcSwap<(u64, C)>,
    /// The last generation handed out.
    generations: AtomicU64,
    /// Unanswered calls in a row on the current connection.
    unanswered: AtomicU32,
    /// When the first of them was made (ms since `epoch`).
    unanswered_since_ms: AtomicU64,
    /// When the last replacement was started (ms since `epoch`; `u64::MAX`: never).
    last_replacement_ms: AtomicU64,
    replacing: AtomicBool,
    epoch: Instant,
    reopen: Reopen<C>,
    /// Counted on each replacement: `slidegate_store_reconnects_total`'s
    /// `backend` label, or the Cluster's own counter.
    kind: Kind,
}

/// Which connection this is, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Standalone,
    Sentinel,
    Cluster,
}

impl<C: Clone + Send + Sync + 'static> Replaceable<C> {
    pub(crate) fn new(connection: C, kind: Kind, reopen: Reopen<C>) -> Arc<Replaceable<C>> {
        Arc::new(Replaceable {
            current: ArcSwap::from_pointee((0, connection)),
            generations: AtomicU64::new(0),
            unanswered: AtomicU32::new(0),
            unanswered_since_ms: AtomicU64::new(0),
            last_replacement_ms: AtomicU64::new(u64::MAX),
            replacing: AtomicBool::new(false),
            epoch: Instant::now(),
            reopen,
            kind,
        })
    }

    /// The connection in use (a cheap clone of a multiplexed handle), for
    /// calls outside [`call`](Self::call) (loading scripts, statistics).
    pub(crate) fn connection(&self) -> C {
        self.current.load().1.clone()
    }

    /// Runs `send` (one call or a pipeline) on the connection in use;
    /// `answered` tells from its result whether the server answered at
    /// all. A call dropped before it ends counts as unanswered.
    pub(crate) async fn call<T, Fut>(
        self: &Arc<Self>,
        send: impl FnOnce(C) -> Fut,
        answered: impl FnOnce(&T) -> bool,
    ) -> T
    where
        Fut: Future<Output = T>,
    {
        self.replace_if_due();
        let (generation, connection) = {
            let current = self.current.load();
            (current.0, current.1.clone())
        };
        let mut guard = Outcome { link: self, generation, answered: false };
        let result = send(connection).await;
        guard.answered = answered(&result);
        result
    }

    /// Puts `connection` in use instead of the current one.
    pub(crate) fn install(&self, connection: C) {
        let generation = self.generations.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        self.current.store(Arc::new((generation, connection)));
        self.unanswered.store(0, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    fn note(&self, generation: u64, answered: bool) {
        if answered {
            // (A new connection starts at 0: an old one's answer changes nothing.)
            if self.unanswered.load(Ordering::Relaxed) != 0 {
                self.unanswered.store(0, Ordering::Relaxed);
            }
        } else if self.current.load().0 != generation {
            // A call of a connection already replaced: not the new one's.
        } else if self.unanswered.fetch_add(1, Ordering::Relaxed) == 0 {
            self.unanswered_since_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// Whether the connection has answered nothing for long enough.
    fn due(&self) -> bool {
        let unanswered = self.unanswered.load(Ordering::Relaxed);
        if unanswered < STALLED_CALLS {
            return false;
        }
        let now = self.now_ms();
        let silence = u64::try_from(SILENCE.as_millis()).unwrap_or(u64::MAX);
        let last = self.last_replacement_ms.load(Ordering::Relaxed);
        if last != u64::MAX && now.saturating_sub(last) < silence {
            return false;
        }
        unanswered >= STALLED_BURST
            || now.saturating_sub(self.unanswered_since_ms.load(Ordering::Relaxed)) >= silence
    }

    /// Starts replacing the connection in the background when it is due.
    fn replace_if_due(self: &Arc<Self>) {
        if !self.due() || self.replacing.swap(true, Ordering::AcqRel) {
            return;
        }
        // Dropped calls may be dropped outside a runtime: nothing to do then.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.replacing.store(false, Ordering::Release);
            return;
        };
        self.last_replacement_ms.store(self.now_ms(), Ordering::Relaxed);
        let link = Arc::clone(self);
        runtime.spawn(async move {
            let unanswered = link.unanswered.load(Ordering::Relaxed);
            tracing::warn!(target: "slidegate", connection = ?link.kind, unanswered, "a store connection stopped answering: opening a new one");
            match (link.reopen)().await {
                Ok(fresh) => {
                    link.install(fresh);
                    match link.kind {
                        Kind::Cluster => metrics::counter!("slidegate_cluster_rebuilds_total").increment(1),
                        Kind::Standalone => {
                            metrics::counter!("slidegate_store_reconnects_total", "backend" => "standalone").increment(1)
                        }
                        Kind::Sentinel => {
                            metrics::counter!("slidegate_store_reconnects_total", "backend" => "sentinel").increment(1)
                        }
                    }
                    tracing::info!(target: "slidegate", connection = ?link.kind, "a new store connection is in use");
                }
                Err(error) => {
                    tracing::warn!(target: "slidegate", connection = ?link.kind, %error, "a new store connection could not be opened yet");
                }
            }
            link.replacing.store(false, Ordering::Release);
        });
    }
}

/// Counts a call's outcome when it ends or is dropped.
struct Outcome<'a, C: Clone + Send + Sync + 'static> {
    link: &'a Arc<Replaceable<C>>,
    generation: u64,
    answered: bool,
}

impl<C: Clone + Send + Sync + 'static> Drop for Outcome<'_, C> {
    fn drop(&mut self) {
        self.link.note(self.generation, self.answered);
        if !self.answered {
            self.link.replace_if_due();
        }
    }
}

/// Whether a call's result shows the server answered (errors included):
/// not a timeout, a broken connection, or a reply that is not RESP.
pub(crate) fn answered<T>(result: &RedisResult<T>) -> bool {
    match result {
        Ok(_) => true,
        Err(e) => {
            !(e.is_timeout()
                || e.is_io_error()
                || e.is_connection_dropped()
                || e.kind() == redis::ErrorKind::Parse)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Arc<Replaceable<u32>> {
        Replaceable::new(1, Kind::Standalone, Box::new(|| Box::pin(async { Ok(2) })))
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_silent_for_a_while_is_replaced_and_one_that_answers_is_not() {
        let link = link();
        for _ in 0..STALLED_CALLS + 1 {
            link.call(|_| async {}, |()| false).await;
        }
        assert!(!link.due(), "unanswered, but not for long");
        // An answer ends the run of unanswered calls.
        link.call(|_| async {}, |()| true).await;
        tokio::time::advance(SILENCE).await;
        assert!(!link.due());
        for _ in 0..STALLED_CALLS {
            link.call(|_| async {}, |()| false).await;
        }
        assert!(!link.due());
        tokio::time::advance(SILENCE).await;
        assert!(link.due());
        link.call(|_| async {}, |()| false).await;
        // The replacement runs in the background.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(link.connection(), 2, "replaced");
        assert!(!link.due(), "a new connection starts afresh");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_unanswered_calls_replaces_at_once_but_not_twice_a_second() {
        let link = link();
        for _ in 0..STALLED_BURST {
            link.call(|_| async {}, |()| false).await;
        }
        // The last of them started the replacement, in the background.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(link.connection(), 2);
        for _ in 0..STALLED_BURST {
            link.call(|_| async {}, |()| false).await;
        }
        assert!(!link.due(), "within a second of the last replacement");
        tokio::time::advance(SILENCE).await;
        assert!(link.due());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_of_a_replaced_connection_are_not_counted_against_the_new_one() {
        let link = link();
        let old = link.current.load().0;
        link.install(3);
        for _ in 0..STALLED_BURST {
            link.note(old, false);
        }
        assert_eq!(link.unanswered.load(Ordering::Relaxed), 0);
    }
}
