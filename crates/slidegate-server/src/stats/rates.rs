//! Admitted and limited requests per second over the last five minutes,
//! per limit: a ring of one slot per second, lock-free (a few relaxed
//! atomics per decision), so recording costs next to nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Seconds the ring covers.
pub const SECONDS: usize = 300;

/// One limit's per-second counts. The ring (about 5 KB) is allocated at
/// the limit's first decision: a configuration of 10,000 descriptors,
/// most of them never hit, costs nothing to load or reload for its charts.
#[derive(Debug, Default)]
pub struct Rates {
    ring: OnceLock<Box<[Slot]>>,
}

/// One second's counts.
#[derive(Debug)]
struct Slot {
    /// The second it counts (`u64::MAX`: none yet).
    second: AtomicU64,
    admitted: AtomicU32,
    limited: AtomicU32,
}

impl Rates {
    /// Counts one decision made in second `now_s` (of any epoch).
    pub fn record(&self, now_s: u64, admitted: bool) {
        let ring = self.ring.get_or_init(|| {
            (0..SECONDS)
                .map(|_| Slot {
                    second: AtomicU64::new(u64::MAX),
                    admitted: AtomicU32::new(0),
                    limited: AtomicU32::new(0),
                })
                .collect()
        });
        let slot = &ring[slot(now_s)];
        let held = slot.second.load(Ordering::Relaxed);
        if held != now_s
            && slot.second.compare_exchange(held, now_s, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            // This second takes the slot over. A count racing the reset
            // may be lost or kept: a display, not an account.
            slot.admitted.store(0, Ordering::Relaxed);
            slot.limited.store(0, Ordering::Relaxed);
        }
        let counter = if admitted { &slot.admitted } else { &slot.limited };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `(admitted, limited)` for each of the `SECONDS` seconds up to and
    /// including `now_s` (oldest first; seconds without decisions are zero).
    pub fn series(&self, now_s: u64) -> (Vec<u32>, Vec<u32>) {
        let Some(ring) = self.ring.get() else {
            return (vec![0; SECONDS], vec![0; SECONDS]);
        };
        let mut admitted = Vec::with_capacity(SECONDS);
        let mut limited = Vec::with_capacity(SECONDS);
        for back in (0..SECONDS as u64).rev() {
            let Some(second) = now_s.checked_sub(back) else {
                admitted.push(0);
                limited.push(0);
                continue;
            };
            let slot = &ring[slot(second)];
            let here = slot.second.load(Ordering::Relaxed) == second;
            admitted.push(if here { slot.admitted.load(Ordering::Relaxed) } else { 0 });
            limited.push(if here { slot.limited.load(Ordering::Relaxed) } else { 0 });
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
    }
}
