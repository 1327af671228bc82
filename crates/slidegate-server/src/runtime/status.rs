//! What the service reports about itself: readiness, the last reload.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use serde::Serialize;

/// The outcome of the last (re)load of the rules.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReloadRecord {
    /// Seconds since the UNIX epoch.
    pub at_unix_s: u64,
    /// `ok` or `error`.
    pub result: &'static str,
    /// What was wrong (a bad file keeps the configuration in force).
    pub errors: Vec<String>,
    /// The hash of the rules in force after it.
    pub config_hash: String,
    /// The hash of the gateway file in force after it, for a gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_hash: Option<String>,
}

/// Shared by the APIs, the reloader and the shutdown.
#[derive(Debug)]
pub(crate) struct ServiceStatus {
    shutting_down: AtomicBool,
    last_reload: Mutex<ReloadRecord>,
    /// Reloads since the start, whatever their result.
    reloads: AtomicU64,
    started: SystemTime,
}

fn unix_s(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ServiceStatus {
    /// A service that loaded the rules of hash `config_hash` (and the
    /// gateway file of hash `gateway_hash`).
    pub(crate) fn new(config_hash: &str, gateway_hash: Option<&str>) -> ServiceStatus {
        let now = SystemTime::now();
        ServiceStatus {
            shutting_down: AtomicBool::new(false),
            last_reload: Mutex::new(ReloadRecord {
                at_unix_s: unix_s(now),
                result: "ok",
                errors: Vec::new(),
                config_hash: config_hash.to_owned(),
                gateway_hash: gateway_hash.map(str::to_owned),
            }),
            reloads: AtomicU64::new(0),
            started: now,
        }
    }

    /// Marks the service as draining: `/readyz` answers 503 from now on.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether it is draining.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Records a reload.
    pub(crate) fn record_reload(&self, errors: Vec<String>, config_hash: &str, gateway_hash: Option<&str>) {
        let record = ReloadRecord {
            at_unix_s: unix_s(SystemTime::now()),
            result: if errors.is_empty() { "ok" } else { "error" },
            errors,
            config_hash: config_hash.to_owned(),
            gateway_hash: gateway_hash.map(str::to_owned),
        };
        *self.last_reload.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = record;
        self.reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// How many reloads ran since the start, whatever their result.
    pub(crate) fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// The last reload.
    pub(crate) fn last_reload(&self) -> ReloadRecord {
        self.last_reload.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// When the service started (seconds since the UNIX epoch).
    pub(crate) fn started_unix_s(&self) -> u64 {
        unix_s(self.started)
    }
}
