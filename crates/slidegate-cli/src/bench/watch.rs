//! What `slidegate bench` watches while its tasks run: the progress bar,
//! and the limiter's circuit breaker.
//!
//! Breaker transitions are counted by polling
//! [`Limiter::breaker_state`](slidegate::Limiter::breaker_state) every
//! [`POLL`], not through the `metrics` facade: a command must not install a
//! global recorder inside a library code path just to count. Polling sees
//! every state held for at least one poll; a shorter one (a probe that fails
//! within a few milliseconds) can be missed, so the count is a lower bound.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use slidegate::BreakerState;
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;

use super::plan::Bound;

/// How often the breaker is polled.
pub const POLL: Duration = Duration::from_millis(10);

/// The progress bar moves every this many polls (ten times a second).
const POLLS_PER_DRAW: u32 = 10;

/// Breaker states seen by polling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerWatch {
    /// Changes of state seen (a lower bound, see the module docs).
    pub transitions: u64,
    /// The state seen last; after the run, the final one.
    pub last: BreakerState,
}

impl BreakerWatch {
    /// Nothing seen yet but `initial`.
    pub fn new(initial: BreakerState) -> BreakerWatch {
        BreakerWatch { transitions: 0, last: initial }
    }

    /// Notes `state`, counting a transition when it differs from the last.
    pub fn observe(&mut self, state: BreakerState) {
        if state != self.last {
            self.transitions += 1;
            self.last = state;
        }
    }
}

/// What the watcher reads and draws.
pub struct Watched<B, C> {
    /// The progress bar (hidden when not drawn).
    pub progress: ProgressBar,
    /// The run's bound, which decides what the bar shows.
    pub bound: Bound,
    /// When the run started.
    pub started: Instant,
    /// Reads the breaker's state.
    pub breaker: B,
    /// Reads the number of completed checks.
    pub completed: C,
}

/// Polls the breaker and moves the progress bar until `stop` fires (or its
/// sender is dropped), then polls once more and returns what it saw.
pub async fn watch<B, C>(watched: Watched<B, C>, mut stop: oneshot::Receiver<()>) -> BreakerWatch
where
    B: Fn() -> BreakerState,
    C: Fn() -> u64,
{
    let Watched { progress, bound, started, breaker, completed } = watched;
    let mut seen = BreakerWatch::new(breaker());
    let mut interval = tokio::time::interval(POLL);
    // After a stall, poll again soon rather than in a burst of catch-up ticks.
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut polls: u32 = 0;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = interval.tick() => {}
        }
        seen.observe(breaker());
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(POLLS_PER_DRAW) {
            draw(&progress, bound, started, completed());
        }
    }
    seen.observe(breaker());
    seen
}

fn draw(progress: &ProgressBar, bound: Bound, started: Instant, completed: u64) {
    match bound {
        Bound::Requests(_) => progress.set_position(completed),
        Bound::Duration(_) => {
            progress.set_position(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            progress.set_message(format!("{completed} decisions"));
        }
    }
}

/// The progress bar of a run with `bound`; hidden unless `visible`.
pub fn progress_bar(bound: Bound, visible: bool) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let (length, template) = match bound {
        Bound::Requests(total) => {
            (total, "{spinner} {elapsed_precise} [{wide_bar}] {human_pos}/{human_len} decisions, {eta} left")
        }
        Bound::Duration(duration) => (
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            "{spinner} {elapsed_precise} [{wide_bar}] {msg}",
        ),
    };
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(length).with_style(style.progress_chars("=> "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::*;

    #[test]
    fn counts_changes_only() {
        let mut seen = BreakerWatch::new(BreakerState::Closed);
        for state in [BreakerState::Closed, BreakerState::Open, BreakerState::Open, BreakerState::HalfOpen] {
            seen.observe(state);
        }
        seen.observe(BreakerState::Closed);
        assert_eq!(seen, BreakerWatch { transitions: 3, last: BreakerState::Closed });
    }

    #[tokio::test]
    async fn polls_once_more_when_stopped() {
        // The state changes and the watcher is stopped before it polls: the
        // last poll still sees the change.
        let state = Arc::new(AtomicU8::new(0));
        let read = Arc::clone(&state);
        let watched = Watched {
            progress: ProgressBar::hidden(),
            bound: Bound::Requests(1),
            started: Instant::now(),
            breaker: move || {
                if read.load(Ordering::Relaxed) == 0 { BreakerState::Closed } else { BreakerState::Open }
            },
            completed: || 0,
        };
        let (stop, stopped) = oneshot::channel();
        let (seen, ()) = tokio::join!(watch(watched, stopped), async {
            state.store(1, Ordering::Relaxed);
            let _ = stop.send(());
        });
        assert_eq!(seen, BreakerWatch { transitions: 1, last: BreakerState::Open });
    }
}
