//! The requests a layer holds waiting for room (shaping, see
//! [`shape`](crate::shape)): bounded in all, and per identity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The most requests one layer holds waiting, by default.
pub(crate) const DEFAULT_MAX_WAITING: usize = 10_000;

/// The requests waiting: in all, and per identity (only identities with
/// requests waiting have an entry).
#[derive(Debug)]
pub(crate) struct Waiting {
    max: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    /// How many wait, and their line: one asks the store at a time.
    by_identity: HashMap<String, (usize, Arc<tokio::sync::Mutex<()>>)>,
}

impl Waiting {
    pub(crate) fn new(max: usize) -> Waiting {
        Waiting { max, counts: Mutex::default() }
    }

    /// A place for a request of `identity`, which may have `cap` waiting;
    /// `None` when it has as many, or the layer its most.
    pub(crate) fn enter(self: &Arc<Self>, identity: String, cap: usize) -> Option<Place> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= self.max {
            return None;
        }
        let (waiting, line) = counts.by_identity.entry(identity.clone()).or_default();
        if *waiting >= cap {
            if *waiting == 0 {
                counts.by_identity.remove(&identity);
            }
            return None;
        }
        *waiting += 1;
        let line = Arc::clone(line);
        counts.total += 1;
        Some(Place { waiting: Arc::clone(self), identity, line })
    }

    /// Requests waiting now.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner).total
    }
}

/// A waiting request's place, given up when it is dropped.
pub(crate) struct Place {
    waiting: Arc<Waiting>,
    identity: String,
    line: Arc<tokio::sync::Mutex<()>>,
}

impl Place {
    /// The identity's turn to ask the store, first come first served:
    /// held while it waits for room, so its other waiting requests do not
    /// all wake to ask at once; given up when admitted or refused.
    pub(crate) async fn turn(&self) -> tokio::sync::OwnedMutexGuard<()> {
        Arc::clone(&self.line).lock_owned().await
    }

    /// The turn, if nobody has it.
    pub(crate) fn free_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        Arc::clone(&self.line).try_lock_owned().ok()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.waiting.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some((waiting, _)) = counts.by_identity.get_mut(&self.identity) {
            *waiting -= 1;
            if *waiting == 0 {
                counts.by_identity.remove(&self.identity);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_identity_and_in_all() {
        let waiting = Arc::new(Waiting::new(3));
        let a1 = waiting.enter("a".into(), 2).expect("a place");
        let _a2 = waiting.enter("a".into(), 2).expect("a second");
        assert!(waiting.enter("a".into(), 2).is_none(), "a's two are waiting");
        let _b = waiting.enter("b".into(), 5).expect("b's");
        assert!(waiting.enter("c".into(), 5).is_none(), "three in all");
        drop(a1);
        assert!(waiting.enter("c".into(), 5).is_some(), "a place given up");
        assert_eq!(waiting.total(), 3 - 1, "the dropped `c` place too");
    }
}
