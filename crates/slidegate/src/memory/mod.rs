//! The embedded in-memory store.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

mod entry;
mod key;
mod leases;
mod reservations;
mod store;

use entry::Entry;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Slot;

use crate::limits::DEFAULT_MAX_KEYS;
use crate::store::validate_time;
use crate::store::{Dimensions, Request};
use crate::{Clock, Decision, Error, ErrorKind, MultiDecision, Rule, SystemClock};
use key::Key;

/// Every this many operations a shard drops its expired keys.
const SWEEP_EVERY: u32 = 4096;

/// A full shard is swept for expired keys at most this often (ms): a flood
/// of new keys into a full store would otherwise scan the whole shard on
/// every request (measured through the service: 10 → 66 µs of CPU per
/// decision).
const FULL_SWEEP_EVERY_MS: u64 = 1000;

/// One lock's share of the keys. The key's hash, computed once per
/// check, picks the shard (bits 32..) and the slot in its table.
#[derive(Default)]
struct Shard {
    map: HashTable<(Key, Entry)>,
    ops: u32,
    /// When the shard, full, was last swept for a new key.
    full_swept_at: Option<u64>,
    /// Leases and reservations: boxed, so a check's shard stays as small
    /// as without them (its lock and table in one cache line).
    holds: Box<Holds>,
}

/// What a shard holds beside its keys' state.
#[derive(Default)]
struct Holds {
    /// Concurrency leases, by limit name and identity.
    leases: std::collections::HashMap<Box<str>, leases::Leases, foldhash::fast::RandomState>,
    /// Reservations, by rule, identity and id.
    reservations: std::collections::HashMap<Box<str>, reservations::Held, foldhash::fast::RandomState>,
}

impl Shard {
    fn sweep(&mut self, now: u64) {
        self.map.retain(|(_, e)| e.expires_at > now);
        self.holds.leases.retain(|_, held| held.expires_at() > now);
        self.holds.reservations.retain(|_, held| held.expires > now);
    }
}

/// A concurrent in-memory [`Store`](crate::Store): the embedded default for single-node
/// use and tests, and the local fallback when Redis is unreachable.
///
/// * **Exact and atomic**: each key's state sits behind one of many shard
///   locks; a check runs the pure [`algorithm`](crate::algorithm) under it.
/// * **Expired state is reclaimed**: each shard drops keys whose window has
///   passed every few thousand operations, and whenever it is full.
/// * **Bounded**: at most [`max_keys`](MemoryStoreBuilder::max_keys) keys
///   (state of one rule for one identity) are held. When full even after
///   dropping expired keys, a check for a *new* key fails with
///   [`ErrorKind::CapacityExhausted`] (transient) rather than evicting live
///   state — evicting would let a flood of fresh keys reset everyone's
///   limits. Existing keys keep working. A key takes an 80-byte slot of
///   the table (identities up to 22 bytes inline); a sliding log with one
///   request in its window holds it there too, and from the second on one
///   16-byte entry per admitted request in a heap block — at most `limit` —
///   while the other algorithms keep a fixed few words; so memory is bounded
///   by `max_keys` times what the rules in use hold per key (`serve` with
///   1,000,000 identities of one request each: ~220 bytes per identity,
///   the table's spare room included).
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use slidegate::store::{Request, Store};
/// use slidegate::{ManualClock, MemoryStore, Rule};
///
/// # tokio_test_shim::block_on(async {
/// let clock = ManualClock::new(0);
/// let store = MemoryStore::builder().clock(clock.clone()).build();
/// let rule = Rule::per_second(NonZeroU32::new(1).unwrap());
/// let request = Request::new(&rule, "alice", 1)?;
/// assert!(store.check(&request).await?.allowed);
/// assert!(!store.check(&request).await?.allowed);
/// clock.advance(Duration::from_secs(1));
/// assert!(store.check(&request).await?.allowed);
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) } }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    max_keys_per_shard: usize,
    max_keys: usize,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("max_keys", &self.inner.max_keys)
            .field("clock", &self.inner.clock)
            .finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

/// Configures a [`MemoryStore`].
#[derive(Debug)]
pub struct MemoryStoreBuilder {
    max_keys: usize,
    shards: usize,
    clock: Arc<dyn Clock>,
}

impl MemoryStoreBuilder {
    /// The most keys held at once (default [`DEFAULT_MAX_KEYS`]); see
    /// [`MemoryStore`] for what happens when full. Spread evenly over the
    /// shards, so a shard may fill slightly before the total is reached.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }

    /// Number of independently locked shards (rounded up to a power of two;
    /// default: 16 × available cores, at least 16).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(1, 1 << 16).next_power_of_two();
        self
    }

    /// The clock deciding "now" (default [`SystemClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Builds the store.
    pub fn build(self) -> MemoryStore {
        let shards = self.shards.min(self.max_keys.next_power_of_two());
        let per_shard = self.max_keys.div_ceil(shards);
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
                hasher: foldhash::fast::RandomState::default(),
                max_keys_per_shard: per_shard,
                max_keys: self.max_keys,
                clock: self.clock,
            }),
        }
    }
}

impl MemoryStore {
    /// A store with default settings and the system clock.
    pub fn new() -> MemoryStore {
        MemoryStore::builder().build()
    }

    /// Starts configuring a store.
    pub fn builder() -> MemoryStoreBuilder {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        MemoryStoreBuilder {
            max_keys: DEFAULT_MAX_KEYS,
            shards: (cores * 16).max(16).next_power_of_two(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Number of keys currently held (including expired ones not yet dropped).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key whose state has expired, now.
    pub fn purge_expired(&self) {
        let now = self.inner.clock.now_ms();
        for shard in self.inner.shards.iter() {
            lock(shard).sweep(now);
        }
    }

    /// Decides synchronously; [`Store::check`](crate::Store::check) wraps this.
    ///
    /// # Errors
    ///
    /// A clock beyond [`MAX_TIME_MS`](crate::limits::MAX_TIME_MS)
    /// ([`ErrorKind::InvalidTime`]), or [`ErrorKind::CapacityExhausted`].
    pub fn check_sync(&self, request: &Request<'_>) -> Result<Decision, Error> {
        let (rule, identity, cost) = (request.rule(), request.identity().as_str(), request.cost());
        let now = validate_time(self.inner.clock.now_ms())?;
        let hash = self.hash(rule, identity);
        let mut shard = lock(&self.inner.shards[self.shard_of(hash)]);
        shard.ops = shard.ops.wrapping_add(1);
        if shard.ops.is_multiple_of(SWEEP_EVERY) {
            shard.sweep(now);
        }
        let entry = self.entry(&mut shard, identity, hash, rule, now)?;
        if rule.penalty().is_none() {
            return Ok(entry.check(rule, now, cost));
        }
        let peeked = entry.peek(rule, now, cost);
        Ok(entry.finish(rule, now, cost, peeked, true))
    }

    /// Decides a multi-dimension check synchronously; [`Store::check_all`](crate::Store::check_all)
    /// wraps this. The shards of all dimensions are locked together (in
    /// index order, so concurrent checks cannot deadlock), so the check is
    /// atomic.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidTime`] or [`ErrorKind::CapacityExhausted`].
    pub fn check_all_sync(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        let requests = dimensions.requests();
        let keys: Vec<(u64, usize)> = requests
            .iter()
            .map(|r| {
                let hash = self.hash(r.rule(), r.identity().as_str());
                (hash, self.shard_of(hash))
            })
            .collect();
        let mut order: Vec<usize> = keys.iter().map(|&(_, shard)| shard).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> =
            order.iter().map(|&i| (i, lock(&self.inner.shards[i]))).collect();
        let now = validate_time(self.inner.clock.now_ms())?;
        let mut peeked = Vec::with_capacity(requests.len());
        for (request, &(hash, shard)) in requests.iter().zip(&keys) {
            let (rule, identity) = (request.rule(), request.identity().as_str());
            let entry = self.entry(guard_of(&mut guards, shard), identity, hash, rule, now)?;
            peeked.push(entry.peek(rule, now, request.cost()));
        }
        let charge = peeked.iter().all(|d| d.allowed);
        let mut decisions = Vec::with_capacity(requests.len());
        for ((request, &(hash, shard)), peek) in requests.iter().zip(&keys).zip(peeked) {
            let (rule, identity) = (request.rule(), request.identity().as_str());
            let entry = self.entry(guard_of(&mut guards, shard), identity, hash, rule, now)?;
            decisions.push(entry.finish(rule, now, request.cost(), peek, charge));
        }
        Ok(MultiDecision::from_decisions(decisions))
    }

    /// [`Store::peek_all`](crate::Store::peek_all), synchronously: each dimension's verdict, nothing
    /// charged, no key created.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidTime`].
    pub fn peek_all_sync(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        let now = validate_time(self.inner.clock.now_ms())?;
        let mut decisions = Vec::with_capacity(dimensions.len());
        for request in dimensions.requests() {
            let (rule, identity) = (request.rule(), request.identity().as_str());
            let hash = self.hash(rule, identity);
            let mut shard = lock(&self.inner.shards[self.shard_of(hash)]);
            let prefix = rule.state_prefix();
            let decision = match shard.map.find_mut(hash, |(key, _)| key.is(prefix, identity)) {
                Some((_, entry)) => entry.peek_only(rule, now, request.cost()),
                None => Entry::new(rule).peek_only(rule, now, request.cost()),
            };
            decisions.push(decision);
        }
        Ok(MultiDecision::from_decisions(decisions))
    }

    /// [`Store::reset`](crate::Store::reset), synchronously: removes the key's entry.
    pub fn reset_sync(&self, request: &Request<'_>) -> bool {
        let (rule, identity) = (request.rule(), request.identity().as_str());
        let hash = self.hash(rule, identity);
        let mut shard = lock(&self.inner.shards[self.shard_of(hash)]);
        let prefix = rule.state_prefix();
        match shard.map.find_entry(hash, |(key, _)| key.is(prefix, identity)) {
            Ok(found) => {
                found.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// The hash of `rule`'s key for `identity` (an encoded identity).
    fn hash(&self, rule: &Rule, identity: &str) -> u64 {
        key::hash(&self.inner.hasher, rule.state_prefix(), identity.as_bytes())
    }

    /// The shard of a key hash: bits 32.. (a table slot is picked by the
    /// low bits and a tag by the top 7, so the three stay independent).
    fn shard_of(&self, hash: u64) -> usize {
        ((hash >> 32) as usize) & (self.inner.shards.len() - 1)
    }

    /// The entry of `rule`'s key for `identity` (hashing to `hash`) in
    /// `shard`, created if the store has room. One lookup when the key is
    /// there.
    fn entry<'s>(
        &self,
        shard: &'s mut Shard,
        identity: &str,
        hash: u64,
        rule: &Rule,
        now: u64,
    ) -> Result<&'s mut Entry, Error> {
        let rehash = |(key, _): &(Key, Entry)| key.hash(&self.inner.hasher);
        let prefix = rule.state_prefix();
        let Shard { map, full_swept_at, .. } = shard;
        let table = match map.entry(hash, |(key, _)| key.is(prefix, identity), rehash) {
            Slot::Occupied(found) => return Ok(&mut found.into_mut().1),
            Slot::Vacant(vacant) => vacant.into_table(),
        };
        if table.len() >= self.inner.max_keys_per_shard {
            // Swept again only a while after the last time (or if the clock
            // went back): until then a new key is refused without a scan.
            if full_swept_at.is_none_or(|at| now < at || now - at >= FULL_SWEEP_EVERY_MS) {
                table.retain(|(_, e)| e.expires_at > now);
                *full_swept_at = Some(now);
            }
            if table.len() >= self.inner.max_keys_per_shard {
                return Err(Error::new(
                    ErrorKind::CapacityExhausted,
                    format!("memory store holds its maximum of {} keys", self.inner.max_keys),
                ));
            }
        }
        Ok(&mut table
            .insert_unique(hash, (Key::new(prefix, identity), Entry::new(rule)), rehash)
            .into_mut()
            .1)
    }
}

/// The locked shard `index` among `guards` (it is always there: the
/// guards were taken for exactly these indices).
fn guard_of<'g, 'm>(guards: &'g mut [(usize, MutexGuard<'m, Shard>)], index: usize) -> &'g mut Shard {
    let at = guards.iter().position(|(i, _)| *i == index).unwrap_or_default();
    &mut guards[at].1
}

/// A poisoned shard only means another thread panicked mid-check; the state
/// is a plain value that is still consistent, so keep serving.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
