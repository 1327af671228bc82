//! The configuration in force, shared by every request and swapped whole
//! on reload.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::Config;

/// A handle on the configuration in force; clones share it.
///
/// Requests read it without a lock and keep the configuration they read
/// until they finish; a reload swaps in a new one atomically.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    current: Arc<ArcSwap<Config>>,
}

impl Rules {
    /// A handle holding `config`.
    pub(crate) fn new(config: Config) -> Rules {
        Rules { current: Arc::new(ArcSwap::from_pointee(config)) }
    }

    /// The configuration in force now.
    pub(crate) fn current(&self) -> Arc<Config> {
        self.current.load_full()
    }

    /// Puts `config` in force; requests in flight finish on the old one.
    #[cfg(test)]
    pub(crate) fn replace(&self, config: Config) {
        self.current.store(Arc::new(config));
    }

    /// Puts `config` in force, returning the configuration it replaced
    /// (requests in flight finish on that one).
    pub(crate) fn swap(&self, config: Config) -> Arc<Config> {
        self.current.swap(Arc::new(config))
    }
}
