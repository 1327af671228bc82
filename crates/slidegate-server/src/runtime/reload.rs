//! Hot reload: the rules file or directory, and the gateway file, are watched; a write, a rename
//! or a Kubernetes ConfigMap's symlink swap (`..data`) reloads it, as do
//! `SIGHUP` and `POST /v1/reload`.
//!
//! A reload builds the whole new configuration first and swaps it in
//! atomically; a bad file never unloads the good configuration: the error
//! is logged, counted and shown in `/v1/status`. Limits whose identity is
//! unchanged keep their counters (they are keyed by what they are, not by
//! when they were loaded).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::process::{in_background, retire};
use super::status::ServiceStatus;
use super::telemetry;
use crate::config::{Config, ConfigError, ConfigErrors, GatewayConfig, Rules, Stamps};
use crate::gateway::Gateway;

/// The longest a reload may take. Files are read only if regular, and
/// with bounds, so only a file system that stops answering (a hung
/// network mount) gets here; the reload fails then, and the next one may
/// run.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Reloads the rules, and the gateway's routes, from their paths.
#[derive(Clone)]
pub(crate) struct Reloader {
    rules: Rules,
    pub(super) path: Option<PathBuf>,
    gateway: Option<(Gateway, PathBuf)>,
    status: Arc<ServiceStatus>,
    /// One reload at a time (file events, signals and the API may race);
    /// it holds what the files looked like when the last one read them,
    /// so that file events that changed none of them reload nothing.
    last_read: Arc<tokio::sync::Mutex<Option<Seen>>>,
}

/// What the files of a reload looked like when it read them: the rules',
/// the gateway file's and its certificates' [`Stamps`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen(Option<Stamps>, Option<Stamps>, Stamps);

impl Seen {
    /// The stamps of the files at `rules` and `gateway`, and of the
    /// certificate files `certificates`, now.
    pub(crate) fn now(rules: Option<&Path>, gateway: Option<&Path>, certificates: &[PathBuf]) -> Seen {
        Seen(
            rules.map(Stamps::of),
            gateway.map(Stamps::of),
            Stamps::of_files(certificates.iter().map(PathBuf::as_path)),
        )
    }

    /// These stamps, with those of the certificate files `certificates` now.
    pub(crate) fn with_certificates(self, certificates: &[PathBuf]) -> Seen {
        Seen(self.0, self.1, Stamps::of_files(certificates.iter().map(PathBuf::as_path)))
    }
}

/// The certificate, key and CA files of `config`: its `tls:` block's and
/// its routes' `upstream_tls:` blocks'.
pub(crate) fn certificate_files(config: Option<&GatewayConfig>) -> Vec<PathBuf> {
    let Some(config) = config else { return Vec::new() };
    let listener = config.tls.iter().flat_map(|tls| tls.files());
    let upstreams = config.routes.iter().filter_map(|r| r.upstream_tls.as_ref()).flat_map(|tls| tls.files());
    let mut files: Vec<PathBuf> = listener.chain(upstreams).map(Path::to_owned).collect();
    files.sort();
    files.dedup();
    files
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("rules", &self.path)
            .field("gateway", &self.gateway.as_ref().map(|(_, path)| path))
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// A reloader of the rules at `path` (if any) and of the gateway file,
    /// whose files looked like `seen` when what is in force was read.
    pub(crate) fn with_gateway(
        rules: Rules,
        path: Option<PathBuf>,
        gateway: Option<(Gateway, PathBuf)>,
        status: Arc<ServiceStatus>,
        seen: Seen,
    ) -> Reloader {
        Reloader { rules, path, gateway, status, last_read: Arc::new(tokio::sync::Mutex::new(Some(seen))) }
    }

    /// The rules path, if the service has rules.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The certificate and key files of the gateway file in force.
    pub(crate) fn certificate_files(&self) -> Vec<PathBuf> {
        let table = self.gateway.as_ref().map(|(gateway, _)| gateway.current());
        certificate_files(table.as_ref().map(|table| &table.config))
    }

    /// The gateway file, if the service is a gateway.
    pub(crate) fn gateway_path(&self) -> Option<&Path> {
        self.gateway.as_ref().map(|(_, path)| path.as_path())
    }

    /// Loads the rules and the gateway file again; puts them in force if
    /// both are valid and either differs from what is in force. One bad
    /// file changes nothing.
    ///
    /// # Errors
    ///
    /// The new configuration's problems; the one in force stays.
    pub(crate) async fn reload(&self) -> Result<bool, ConfigErrors> {
        let mut last_read = self.last_read.lock().await;
        self.reload_locked(&mut last_read).await
    }

    /// [`reload`](Self::reload)s unless none of the files changed since
    /// the last reload read them (what a file event reacts to: the
    /// reload's own reads, or a write to another file beside them, are
    /// events too); `Ok(false)` then.
    ///
    /// # Errors
    ///
    /// As [`reload`](Self::reload).
    pub(crate) async fn reload_if_changed(&self) -> Result<bool, ConfigErrors> {
        let mut last_read = self.last_read.lock().await;
        let (rules, gateway) = (self.path.clone(), self.gateway_path().map(Path::to_owned));
        let certificates = self.certificate_files();
        let now = tokio::task::spawn_blocking(move || {
            Seen::now(rules.as_deref(), gateway.as_deref(), &certificates)
        })
        .await;
        if now.is_ok_and(|now| last_read.as_ref() == Some(&now)) {
            return Ok(false);
        }
        self.reload_locked(&mut last_read).await
    }

    async fn reload_locked(&self, last_read: &mut Option<Seen>) -> Result<bool, ConfigErrors> {
        let rules_path = self.path.clone();
        let gateway_path = self.gateway.as_ref().map(|(_, path)| path.clone());
        let previous = self.rules.current();
        let certificates = self.certificate_files();
        let loaded = tokio::time::timeout(
            RELOAD_TIMEOUT,
            in_background(move || {
                // Before the files are read: a change while they are
                // read is a change the next event reloads.
                let seen = Seen::now(rules_path.as_deref(), gateway_path.as_deref(), &certificates);
                let rules = rules_path.map(|path| {
                    let config = Config::load(&path)?;
                    if config.hash() != previous.hash() {
                        config.adopt_rates(&previous);
                    }
                    Ok(config)
                });
                let gateway = gateway_path.map(|path| GatewayConfig::load(&path));
                (seen, rules, gateway)
            }),
        )
        .await
        .unwrap_or_else(|_| Err(format!("the files were not read within {RELOAD_TIMEOUT:?}")));
        let (rules, gateway) = match loaded {
            Ok((seen, rules, gateway)) => {
                *last_read = Some(seen);
                (rules, gateway)
            }
            Err(e) => {
                let at =
                    self.path.clone().or_else(|| self.gateway_path().map(Path::to_owned)).unwrap_or_default();
                (Some(Err(ConfigErrors(vec![ConfigError::whole(&at, e)]))), None)
            }
        };
        let mut errors = Vec::new();
        let rules = match rules {
            Some(Ok(config)) => Some(config),
            Some(Err(e)) => {
                errors.extend(e.0);
                None
            }
            None => None,
        };
        let table = match (gateway, &self.gateway) {
            (Some(Ok(config)), Some((gateway, _))) if config.hash != gateway.current().config.hash => {
                match gateway.build(config) {
                    Ok(table) => Some(table),
                    Err(e) => {
                        errors.extend(e.0);
                        None
                    }
                }
            }
            (Some(Err(e)), _) => {
                errors.extend(e.0);
                None
            }
            _ => None,
        };
        if !errors.is_empty() {
            let errors = ConfigErrors(errors);
            tracing::error!(target: "slidegate", %errors, "reload refused; the configuration in force stays");
            self.record(errors.errors().iter().map(ToString::to_string).collect());
            telemetry::reload(false);
            return Err(errors);
        }
        let mut changed = false;
        if let Some(config) = rules
            && config.hash() != self.rules.current().hash()
        {
            tracing::info!(target: "slidegate", hash = config.hash(), "rules reloaded");
            retire(self.rules.swap(config));
            changed = true;
        }
        if let (Some(table), Some((gateway, _))) = (table, &self.gateway) {
            tracing::info!(target: "slidegate", hash = table.config.hash, "gateway routes reloaded");
            gateway.install(table);
            changed = true;
        }
        self.record(Vec::new());
        telemetry::reload(true);
        Ok(changed)
    }

    fn record(&self, errors: Vec<String>) {
        let gateway_hash = self.gateway.as_ref().map(|(gateway, _)| gateway.current().config.hash.clone());
        self.status.record_reload(errors, self.rules.current().hash(), gateway_hash.as_deref());
    }
}
