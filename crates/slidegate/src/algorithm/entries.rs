//! The ordered `(position, cost)` entries of a sliding log (positions are
//! times) and of a sliding counter (bucket indices), stored so that the
//! common case costs no allocation.
//!
//! Most keys of a busy store are identities seen once or twice per window:
//! a `VecDeque` would allocate 64 bytes for the first entry (four slots),
//! and take 32 bytes in the map's slot. Here no entry and one entry live in
//! the 16-byte value itself; from the second entry on they move to a box
//! holding a `VecDeque` and its first and last positions ([`Many`]), which
//! is dropped again when the window empties it.
//! Measured through `serve` on the memory store, 1,000,000 identities of
//! one request each (with the key's prefix one word, see `memory::key`):
//! 354 MB → 255 MB resident.

use std::collections::VecDeque;

/// Sorted entries; see the module documentation.
#[derive(Debug, Clone, Default)]
pub(super) enum Entries<K> {
    #[default]
    Empty,
    /// The fields apart (not a tuple) so the tag fits beside the cost and
    /// the whole stays 16 bytes.
    One(K, u32),
    Many(Box<Many<K>>),
}

/// Two entries or more: one word in the value (not the deque's four), and
/// beside the deque the first and last positions, which every decision
/// reads (what has expired, when the newest expires): they come with the
/// deque's own fields, not from the far ends of its buffer (two cache
/// misses per decision once a store's keys outgrow the cache).
#[derive(Debug, Clone)]
pub(super) struct Many<K> {
    first: K,
    last: K,
    deque: VecDeque<(K, u32)>,
}

impl<K: Copy> Entries<K> {
    pub(super) fn len(&self) -> usize {
        match self {
            Entries::Empty => 0,
            Entries::One(..) => 1,
            Entries::Many(many) => many.deque.len(),
        }
    }

    pub(super) fn get(&self, at: usize) -> Option<(K, u32)> {
        match self {
            Entries::One(position, cost) if at == 0 => Some((*position, *cost)),
            Entries::Many(many) => many.deque.get(at).copied(),
            _ => None,
        }
    }

    #[cfg(test)]
    fn front(&self) -> Option<(K, u32)> {
        self.get(0)
    }

    #[cfg(test)]
    fn back(&self) -> Option<(K, u32)> {
        self.len().checked_sub(1).and_then(|last| self.get(last))
    }

    /// The oldest entry's position (read without the deque's buffer).
    pub(super) fn first_position(&self) -> Option<K> {
        match self {
            Entries::Empty => None,
            Entries::One(position, _) => Some(*position),
            Entries::Many(many) => Some(many.first),
        }
    }

    /// The newest entry's position (read without the deque's buffer).
    pub(super) fn last_position(&self) -> Option<K> {
        match self {
            Entries::Empty => None,
            Entries::One(position, _) => Some(*position),
            Entries::Many(many) => Some(many.last),
        }
    }

    /// Removes the oldest entries while `expired` holds for their position
    /// (read beside the deque, not from its buffer); returns their summed
    /// cost.
    pub(super) fn drop_front_while(&mut self, expired: impl Fn(K) -> bool) -> u64 {
        let mut dropped = 0;
        while let Some(first) = self.first_position()
            && expired(first)
        {
            dropped += self.pop_front().map_or(0, |(_, cost)| u64::from(cost));
        }
        dropped
    }

    /// Removes the oldest entry and returns it; a box left empty is freed.
    pub(super) fn pop_front(&mut self) -> Option<(K, u32)> {
        match self {
            Entries::Empty => None,
            Entries::One(position, cost) => {
                let popped = (*position, *cost);
                *self = Entries::Empty;
                Some(popped)
            }
            Entries::Many(many) => {
                let popped = many.deque.pop_front();
                match many.deque.front() {
                    Some(&(first, _)) => many.first = first,
                    None => *self = Entries::Empty,
                }
                popped
            }
        }
    }

    /// The entries, oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        (0..self.len()).map_while(|at| self.get(at))
    }

    /// The index of the first entry for which `before` is false (`before`
    /// holds for a prefix of the entries).
    pub(super) fn partition_point(&self, mut before: impl FnMut(&K) -> bool) -> usize {
        match self {
            Entries::Empty => 0,
            Entries::One(position, _) => usize::from(before(position)),
            Entries::Many(many) => many.deque.partition_point(|(position, _)| before(position)),
        }
    }

    /// Adds `cost` at `position`, keeping the entries sorted: onto the
    /// entry already there (entries at one position expire together, so
    /// one entry of their summed cost is the same log), or as a new one.
    /// The common case, a charge at the newest position, reads only the
    /// last entry; a search runs only for an earlier position (a clock
    /// that stepped back).
    ///
    /// Returns the cost added: all of it, but for what would take one
    /// entry past `u32::MAX` (only a charge can, [`State::charge`]).
    ///
    /// [`State::charge`]: super::State::charge
    pub(super) fn add_sorted(&mut self, position: K, cost: u32) -> u32
    where
        K: Ord,
    {
        let len = self.len();
        match self.last_position() {
            Some(last) if last == position => self.add_cost(len - 1, cost),
            Some(last) if last > position => {
                let at = self.partition_point(|&p| p < position);
                match self.get(at) {
                    Some((p, _)) if p == position => self.add_cost(at, cost),
                    _ => {
                        self.insert(at, position, cost);
                        cost
                    }
                }
            }
            _ => {
                self.insert(len, position, cost);
                cost
            }
        }
    }

    /// Takes up to `cost` off the entry at `position` (an entry taken to 0
    /// goes); returns what it took (0 when there is no entry there).
    pub(super) fn take(&mut self, position: K, cost: u32) -> u32
    where
        K: Ord,
    {
        let at = self.partition_point(|&p| p < position);
        let taken = match self.get(at) {
            Some((p, held)) if p == position => cost.min(held),
            _ => return 0,
        };
        let mut kept = Entries::Empty;
        for (index, (p, held)) in self.iter().enumerate() {
            let held = if index == at { held - taken } else { held };
            if held > 0 {
                kept.insert(kept.len(), p, held);
            }
        }
        *self = kept;
        taken
    }

    /// Inserts an entry at `at` (`<= len`), shifting later ones.
    pub(super) fn insert(&mut self, at: usize, position: K, cost: u32) {
        match self {
            Entries::Empty => *self = Entries::One(position, cost),
            Entries::One(first, first_cost) => {
                let first = (*first, *first_cost);
                let mut deque = VecDeque::with_capacity(4);
                deque.push_back(first);
                deque.insert(at.min(1), (position, cost));
                let (first, last) = (deque[0].0, deque[1].0);
                *self = Entries::Many(Box::new(Many { first, last, deque }));
            }
            Entries::Many(many) => {
                let len = many.deque.len();
                let at = at.min(len);
                many.deque.insert(at, (position, cost));
                if at == 0 {
                    many.first = position;
                }
                if at == len {
                    many.last = position;
                }
            }
        }
    }

    /// Adds `cost` to the entry at `at`, if there is one, up to
    /// `u32::MAX`; returns what it added.
    pub(super) fn add_cost(&mut self, at: usize, cost: u32) -> u32 {
        let entry_cost = match self {
            Entries::One(_, first_cost) if at == 0 => first_cost,
            Entries::Many(many) => match many.deque.get_mut(at) {
                Some((_, entry_cost)) => entry_cost,
                None => return 0,
            },
            _ => return 0,
        };
        let added = cost.min(u32::MAX - *entry_cost);
        *entry_cost += added;
        added
    }
}

/// Equal when they hold the same entries, however stored.
impl<K: Copy + PartialEq> PartialEq for Entries<K> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<K: Copy + Eq> Eq for Entries<K> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries behave like the `VecDeque` they replace, through every
    /// change of representation.
    #[test]
    fn behaves_like_a_deque_through_empty_one_and_many() {
        let mut entries = Entries::<u64>::default();
        let mut model: VecDeque<(u64, u32)> = VecDeque::new();
        let check = |entries: &Entries<u64>, model: &VecDeque<(u64, u32)>| {
            assert_eq!(entries.len(), model.len());
            assert_eq!(entries.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            assert_eq!(entries.front(), model.front().copied());
            assert_eq!(entries.back(), model.back().copied());
            assert_eq!(entries.first_position(), model.front().map(|&(p, _)| p));
            assert_eq!(entries.last_position(), model.back().map(|&(p, _)| p));
            for probe in 0..12 {
                assert_eq!(
                    entries.partition_point(|&p| p <= probe),
                    model.partition_point(|&(p, _)| p <= probe),
                    "{probe}"
                );
            }
        };
        check(&entries, &model);
        // Times out of order (a clock stepping back) land sorted.
        for (time, cost) in [(5, 1), (3, 2), (9, 1), (9, 4), (1, 1)] {
            let at = entries.partition_point(|&p| p <= time);
            entries.insert(at, time, cost);
            model.insert(model.partition_point(|&(p, _)| p <= time), (time, cost));
            check(&entries, &model);
        }
        entries.add_cost(1, 10);
        model[1].1 += 10;
        entries.add_cost(99, 1);
        check(&entries, &model);
        // The entries before 5 go, (1, 1) and (3, 12); the rest stay.
        assert_eq!(entries.drop_front_while(|p| p < 5), 1 + 12);
        model.drain(..2);
        check(&entries, &model);
        while let Some(oldest) = model.pop_front() {
            assert_eq!(entries.pop_front(), Some(oldest));
            check(&entries, &model);
        }
        assert!(matches!(entries, Entries::Empty), "the box is freed once empty");
        entries.pop_front();
        check(&entries, &model);

        entries.insert(0, 7, 1);
        assert!(matches!(entries, Entries::One(7, 1)));
        entries.insert(0, 2, 3);
        assert_eq!(entries.iter().collect::<Vec<_>>(), [(2, 3), (7, 1)]);
        entries.add_cost(0, 1);
        assert_eq!(entries.front(), Some((2, 4)));
    }

    /// Charges added in any order end sorted, one entry per position,
    /// each with the sum of its charges: what a sorted map would hold.
    #[test]
    fn added_charges_land_sorted_one_entry_per_position() {
        let mut entries = Entries::<u64>::default();
        let mut model = std::collections::BTreeMap::<u64, u32>::new();
        // The newest position again, later ones, and earlier ones (a
        // clock stepping back): onto an entry, between, before all.
        let charges =
            [(5, 1), (5, 2), (6, 1), (9, 3), (7, 1), (6, 4), (9, 1), (1, 2), (1, 1), (12, 1), (0, 5)];
        for (position, cost) in charges {
            entries.add_sorted(position, cost);
            *model.entry(position).or_default() += cost;
            assert_eq!(
                entries.iter().collect::<Vec<_>>(),
                model.iter().map(|(&p, &c)| (p, c)).collect::<Vec<_>>(),
                "after ({position}, {cost})"
            );
            assert_eq!(entries.first_position(), model.keys().next().copied());
            assert_eq!(entries.last_position(), model.keys().next_back().copied());
        }
        let mut one = Entries::<u64>::default();
        one.add_sorted(3, 1);
        one.add_sorted(3, 1);
        assert!(matches!(one, Entries::One(3, 2)), "a repeated position stays one entry, unboxed");
    }

    /// Taking cost off an entry keeps the rest sorted and the ends right;
    /// an entry taken to nothing goes, and a missing position takes nothing.
    #[test]
    fn taken_costs_leave_what_a_sorted_map_would() {
        let mut entries = Entries::<u64>::default();
        let mut model = std::collections::BTreeMap::<u64, u32>::new();
        for (position, cost) in [(1, 2), (3, 4), (5, 1), (8, 3)] {
            entries.add_sorted(position, cost);
            model.insert(position, cost);
        }
        for (position, cost) in [(3, 1), (4, 9), (5, 7), (1, 2), (8, 1), (3, 3), (8, 5)] {
            let held = model.get(&position).copied().unwrap_or(0);
            assert_eq!(entries.take(position, cost), cost.min(held), "take ({position}, {cost})");
            if held > 0 {
                if held > cost {
                    model.insert(position, held - cost);
                } else {
                    model.remove(&position);
                }
            }
            assert_eq!(
                entries.iter().collect::<Vec<_>>(),
                model.iter().map(|(&p, &c)| (p, c)).collect::<Vec<_>>()
            );
            assert_eq!(entries.first_position(), model.keys().next().copied());
            assert_eq!(entries.last_position(), model.keys().next_back().copied());
        }
        assert!(matches!(entries, Entries::Empty));
    }

    #[test]
    fn equal_whatever_the_representation_and_small() {
        let mut boxed = Entries::<i64>::default();
        boxed.insert(0, 4, 1);
        boxed.insert(1, 8, 1);
        boxed.pop_front();
        assert!(matches!(boxed, Entries::Many(_)));
        assert_eq!(boxed, Entries::One(8, 1));
        assert_ne!(boxed, Entries::One(8, 2));
        assert_ne!(boxed, Entries::Empty);
        assert_eq!(std::mem::size_of::<Entries<u64>>(), 16);
        assert_eq!(std::mem::size_of::<Entries<i64>>(), 16);
    }
}
