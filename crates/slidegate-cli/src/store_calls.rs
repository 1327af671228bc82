//! Whether a [`Limiter`](slidegate::Limiter) asked its store for a decision.
//!
//! The limiter answers some checks itself — from its deny cache, or by the
//! failure policy while the breaker is open — and its `Decision` does not
//! say which. `bench` wants to count deny-cache hits without installing a
//! global metrics recorder, so the store is wrapped in [`Observed`], which
//! notes each call in a task-local flag, and each check runs inside
//! [`asking`], which reads it. A denial that is not degraded and for which
//! the store was never called came from the deny cache.
//!
//! The flag is task-local, not shared: concurrent checks on other tasks
//! cannot set it, and the limiter calls the store on the caller's task.

use std::cell::Cell;
use std::future::Future;

use slidegate::{Decision, Dimension, Error, MultiDecision, Rule, Store};

tokio::task_local! {
    /// Set when the store is called during the check [`asking`] runs.
    static ASKED: Cell<bool>;
}

/// A store that notes, for [`asking`], that it was called.
#[derive(Debug, Clone)]
pub struct Observed<S>(pub S);

impl<S: Store> Store for Observed<S> {
    fn check(
        &self,
        rule: &Rule,
        key: &str,
        cost: u32,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        // Outside `asking` there is nothing to note; that is not an error.
        let _ = ASKED.try_with(|asked| asked.set(true));
        self.0.check(rule, key, cost)
    }

    fn check_all(
        &self,
        dimensions: &[Dimension<'_>],
        cost: u32,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        let _ = ASKED.try_with(|asked| asked.set(true));
        self.0.check_all(dimensions, cost)
    }

    fn is_local(&self) -> bool {
        self.0.is_local()
    }

    fn releases_charges(&self) -> bool {
        self.0.releases_charges()
    }
}

/// Runs `check` and says whether an [`Observed`] store was called during it.
pub async fn asking<F: Future>(check: F) -> (F::Output, bool) {
    ASKED
        .scope(Cell::new(false), async {
            let output = check.await;
            (output, ASKED.with(Cell::get))
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidegate::{Limiter, MemoryStore};

    use super::*;

    #[tokio::test]
    async fn notes_store_calls_only_inside_asking() {
        let limiter = Limiter::new(Observed(MemoryStore::new()));
        let rule = Rule::new(1, Duration::from_secs(60)).unwrap();
        let (decision, asked) = asking(limiter.check(&rule, "k")).await;
        assert!(decision.unwrap().allowed && asked);
        // Outside `asking`, the call still works.
        assert!(!limiter.check(&rule, "k").await.unwrap().allowed);
        // Switched off: answered without the store.
        limiter.set_enabled(false);
        let (decision, asked) = asking(limiter.check(&rule, "k")).await;
        assert!(decision.unwrap().allowed && !asked);
    }
}
