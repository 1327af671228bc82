//! The Prometheus exporter: one recorder per process, its histograms'
//! buckets, and the upkeep that folds samples into them.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// How often histogram samples are folded into their buckets.
const METRICS_UPKEEP: Duration = Duration::from_secs(2);

/// The Prometheus recorder, installed once per process (a second
/// in-process server shares it; `None` if another recorder was there).
pub(crate) fn prometheus() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Latencies as histograms (Prometheus computes quantiles across
            // instances from buckets, not from per-process summaries).
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
                    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0],
                )
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            crate::runtime::telemetry::recorder_installed();
            // Histogram samples pile up until upkeep folds them into their
            // buckets: without it, a service nobody scrapes grows by every
            // sample it ever recorded (measured: ~1 MiB a second at 30,000
            // decisions a second).
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new().name("slidegate-metrics".into()).spawn(move || {
                loop {
                    std::thread::sleep(METRICS_UPKEEP);
                    upkeep.run_upkeep();
                }
            });
            if let Err(error) = spawned {
                tracing::warn!(%error, "cannot start the metrics upkeep thread");
            }
            Some(handle)
        })
        .clone()
}
