//! What runs the service: the listeners' accept loop and connections, the
//! metrics exporter and the metrics the service records, reloading the
//! configuration (file watch, `SIGHUP`, the admin API) and the record of
//! what is in force.

pub(crate) mod accept;
pub(crate) mod connection_io;
pub(crate) mod exporter;
pub(crate) mod process;
pub(crate) mod reload;
pub(crate) mod status;
pub(crate) mod telemetry;
pub(crate) mod watch;
