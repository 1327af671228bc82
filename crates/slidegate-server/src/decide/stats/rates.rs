//! Admitted and limited requests per second over the last five minutes,
//! per limit: the second being counted inline, and a ring of one slot per
//! second it is folded into when the next second begins — lock-free (a
//! few relaxed atomics per decision, on one cache line), so recording
//! costs next to nothing even with 10,000 limits each hit now and then.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Seconds the ring covers.
pub(crate) const SECONDS: usize = 300;

/// One limit's per-second counts. The ring (about 5 KB) is allocated when
/// the limit's first second is over: a configuration of 10,000
/// descriptors, most of them never hit, costs nothing to load or reload
/// for its charts. A limit holds its rates inline (a decision counts in
/// the limit's own cache lines); a reload's new limit takes them over
/// ([`Rates::take_over`]).
#[derive(Debug)]
pub(crate) struct Rates {
    /// The second being counted (the latest seen).
    current: Slot,
    /// The seconds before it; shared with the limit that took them over.
    ring: OnceLock<Arc<[Slot]>>,
}

impl Default for Rates {
    fn default() -> Rates {
        Rates { current: Slot::empty(), ring: OnceLock::new() }
    }
}

/// One second's counts.
#[derive(Debug)]
struct Slot {
    /// The second it counts (`u64::MAX`: none yet).
    second: AtomicU64,
    admitted: AtomicU32,
    limited: AtomicU32,
}

impl Slot {
    fn empty() -> Slot {
        Slot { second: AtomicU64::new(u64::MAX), admitted: AtomicU32::new(0), limited: AtomicU32::new(0) }
    }

    /// Its counts if it counts `second`.
    fn counts(&self, second: u64) -> Option<(u32, u32)> {
        (self.second.load(Ordering::Relaxed) == second)
            .then(|| (self.admitted.load(Ordering::Relaxed), self.limited.load(Ordering::Relaxed)))
    }
}

impl Rates {
    /// Counts one decision made in second `now_s` (of any epoch).
    pub(crate) fn record(&self, now_s: u64, admitted: bool) {
        let held = self.current.second.load(Ordering::Relaxed);
        if held != now_s {
            if held != u64::MAX && now_s < held {
                // A decision from a second already over (a thread whose
                // clock read came late): straight into the ring.
                self.add_to_ring(now_s, admitted);
                return;
            }
            if self.current.second.compare_exchange(held, now_s, Ordering::Relaxed, Ordering::Relaxed).is_ok()
            {
                // This second takes over; the one before goes to the ring.
                // A count racing the hand-over may land in either: a
                // display, not an account.
                let before = (
                    self.current.admitted.swap(0, Ordering::Relaxed),
                    self.current.limited.swap(0, Ordering::Relaxed),
                );
                if held != u64::MAX {
                    self.fold(held, before);
                }
            }
        }
        let counter = if admitted { &self.current.admitted } else { &self.current.limited };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn ring(&self) -> &[Slot] {
        self.ring.get_or_init(|| (0..SECONDS).map(|_| Slot::empty()).collect())
    }

    /// Takes over `other`'s counts, for a limit that has counted nothing
    /// yet: `other`'s ring, shared from now on, and a copy of the second it
    /// is counting. A decision racing the hand-over may count in either (a
    /// display, not an account).
    pub(crate) fn take_over(&self, other: &Rates) {
        let (mine, theirs) = (&self.current, &other.current);
        mine.second.store(theirs.second.load(Ordering::Relaxed), Ordering::Relaxed);
        mine.admitted.store(theirs.admitted.load(Ordering::Relaxed), Ordering::Relaxed);
        mine.limited.store(theirs.limited.load(Ordering::Relaxed), Ordering::Relaxed);
        if let Some(ring) = other.ring.get() {
            let _ = self.ring.set(Arc::clone(ring));
        }
    }

    /// Puts a finished second's counts in its slot.
    fn fold(&self, second: u64, (admitted, limited): (u32, u32)) {
        let slot = &self.ring()[slot(second)];
        slot.second.store(second, Ordering::Relaxed);
        slot.admitted.store(admitted, Ordering::Relaxed);
        slot.limited.store(limited, Ordering::Relaxed);
    }

    /// Counts a decision of a second already folded (or about to be).
    fn add_to_ring(&self, second: u64, admitted: bool) {
        let slot = &self.ring()[slot(second)];
        let held = slot.second.load(Ordering::Relaxed);
        if held != second {
            if held != u64::MAX && held > second {
                return; // older than what the slot now holds: gone
            }
            if slot.second.compare_exchange(held, second, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                slot.admitted.store(0, Ordering::Relaxed);
                slot.limited.store(0, Ordering::Relaxed);
            }
        }
        let counter = if admitted { &slot.admitted } else { &slot.limited };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `(admitted, limited)` for each of the `SECONDS` seconds up to and
    /// including `now_s` (oldest first; seconds without decisions are zero).
    pub(crate) fn series(&self, now_s: u64) -> (Vec<u32>, Vec<u32>) {
        let mut admitted = Vec::with_capacity(SECONDS);
        let mut limited = Vec::with_capacity(SECONDS);
        let ring = self.ring.get();
        for back in (0..SECONDS as u64).rev() {
            let counts = now_s.checked_sub(back).and_then(|second| {
                self.current
                    .counts(second)
                    .or_else(|| ring.and_then(|ring| ring[slot(second)].counts(second)))
            });
            let (a, l) = counts.unwrap_or((0, 0));
            admitted.push(a);
            limited.push(l);
        }
        (admitted, limited)
    }
}

fn slot(second: u64) -> usize {
    usize::try_from(second % SECONDS as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_second_and_forgets_after_five_minutes() {
        let rates = Rates::default();
        for _ in 0..3 {
            rates.record(1000, true);
        }
        rates.record(1000, false);
        rates.record(1002, false);
        let (admitted, limited) = rates.series(1002);
        assert_eq!(admitted.len(), SECONDS);
        assert_eq!((admitted[SECONDS - 3], limited[SECONDS - 3]), (3, 1), "second 1000");
        assert_eq!((admitted[SECONDS - 1], limited[SECONDS - 1]), (0, 1), "second 1002, now");
        // Five minutes later the slot of second 1000 holds second 1300.
        rates.record(1300, true);
        let (admitted, limited) = rates.series(1300);
        assert_eq!(admitted.iter().sum::<u32>(), 1);
        assert_eq!(limited.iter().sum::<u32>(), 1, "second 1002 is still in the window");
    }

    #[test]
    fn a_limit_never_hit_shows_zeros_without_a_ring() {
        let rates = Rates::default();
        assert!(rates.ring.get().is_none());
        let (admitted, limited) = rates.series(5);
        assert_eq!((admitted, limited), (vec![0; SECONDS], vec![0; SECONDS]));
        rates.record(5, true);
        assert_eq!(rates.series(5).0[SECONDS - 1], 1);
        assert!(rates.ring.get().is_none(), "the first second is counted inline");
    }

    #[test]
    fn a_late_decision_counts_in_its_own_second() {
        let rates = Rates::default();
        rates.record(1000, true);
        rates.record(1001, true);
        rates.record(1000, false); // its clock read came before second 1001 began
        rates.record(1001, true);
        let (admitted, limited) = rates.series(1001);
        assert_eq!((admitted[SECONDS - 2], limited[SECONDS - 2]), (1, 1), "second 1000");
        assert_eq!((admitted[SECONDS - 1], limited[SECONDS - 1]), (2, 0), "second 1001");
        // Five minutes old: in no second shown.
        rates.record(1001 - SECONDS as u64, true);
        assert_eq!(rates.series(1001).0.iter().sum::<u32>(), 3);
    }

    #[test]
    fn a_limit_taking_over_rates_shows_their_past_and_counts_on() {
        let old = Rates::default();
        old.record(1000, true);
        old.record(1001, false);
        old.record(1001, true);
        let new = Rates::default();
        new.take_over(&old);
        new.record(1001, true);
        new.record(1002, true);
        let (admitted, limited) = new.series(1002);
        assert_eq!((admitted[SECONDS - 3], limited[SECONDS - 3]), (1, 0), "second 1000, from the old ring");
        assert_eq!((admitted[SECONDS - 2], limited[SECONDS - 2]), (2, 1), "second 1001, carried on");
        assert_eq!((admitted[SECONDS - 1], limited[SECONDS - 1]), (1, 0), "second 1002");
        let fresh = Rates::default();
        fresh.take_over(&Rates::default());
        assert_eq!(fresh.series(5).0, vec![0; SECONDS], "nothing to take over");
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let rates = std::sync::Arc::new(Rates::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let rates = std::sync::Arc::clone(&rates);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        rates.record(100, i % 4 != 0);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let (admitted, limited) = rates.series(100);
        assert_eq!((admitted[SECONDS - 1], limited[SECONDS - 1]), (30_000, 10_000));
    }
}
